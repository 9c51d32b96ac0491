"""Session traces: which are pending, what text a model sees, and the state file.

A trace is any non-hidden regular file under the traces folder (searched
recursively; a file or folder whose name starts with `.` is ignored, and so
is a file with a NUL byte in its first 8 KiB, which is not a transcript).
Its *session* is its path relative to the traces folder, with `/`.

The state file is `sha256sum` output: one `<64 hex>  <absolute path>` line
per trace that was analysed successfully, so `sha256sum -c` on it tells
which traces are unchanged. A trace is pending when the pair (its current
hash, its path) is not in the file: new, grown, changed, or failed last
time (a failed trace's new hash is never written). The hand run kept paths
only, so a trace that grew after it was read stayed "done"; a hash cannot.

JSONL and JSON traces are rendered before a model sees them: each record's
string values become `key: value` lines (JSON escapes decoded), so a model
can quote the words a person would read, and the quote check compares
against exactly that rendering.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Trace",
    "TraceChanged",
    "format_state",
    "parse_state",
    "pending",
    "read_snapshot",
    "read_state",
    "render",
    "scan",
    "sha256_bytes",
    "update_state",
]

SNIFF_BYTES = 8192
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")
# Keys whose values are bookkeeping, not words anyone said.
NOISE_KEYS = frozenset(
    {"id", "uuid", "parentUuid", "parent_id", "timestamp", "ts", "sessionId", "session_id",
     "requestId", "request_id", "signature", "hash", "cwd", "version", "gitBranch"}
)  # fmt: skip


class TraceChanged(Exception):
    """A trace no longer starts with the bytes that were analysed."""


@dataclass(frozen=True)
class Trace:
    """One transcript as found: where, which session, and its hash right now."""

    path: str
    session: str
    sha256: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sha256_file(path: Path) -> tuple[str, int, bool]:
    digest = hashlib.sha256()
    size = 0
    binary = False
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            if size < SNIFF_BYTES and b"\0" in chunk[: SNIFF_BYTES - size]:
                binary = True
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size, binary


def _walk(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                yield Path(folder) / name


def scan(root: Path) -> tuple[list[Trace], list[str]]:
    """Every trace under `root` sorted by session, and the sessions skipped as binary."""
    if not root.is_dir():
        raise FileNotFoundError(
            f"the traces folder {root} does not exist; create it or point [backpass] traces "
            "(or --traces) at the folder holding session transcripts"
        )
    found: list[Trace] = []
    skipped: list[str] = []
    for path in _walk(root):
        if not path.is_file():
            continue
        session = path.relative_to(root).as_posix()
        digest, size, binary = _sha256_file(path)
        if binary:
            skipped.append(session)
            continue
        found.append(Trace(str(path.resolve()), session, digest, size))
    found.sort(key=lambda trace: trace.session)
    return found, skipped


# --- the state file ------------------------------------------------------------------------


def _escape(path: str) -> tuple[str, str]:
    """sha256sum's escaping: a leading backslash when the name holds `\\` or a newline."""
    if "\\" in path or "\n" in path or "\r" in path:
        return "\\", path.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "", path


def _unescape(path: str) -> str:
    out, chars = [], iter(path)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            out.append({"n": "\n", "r": "\r", "\\": "\\"}.get(following, "\\" + following))
        else:
            out.append(char)
    return "".join(out)


def parse_state(text: str) -> dict[str, str]:
    """path -> sha256 from `sha256sum` lines; other lines are ignored."""
    entries: dict[str, str] = {}
    for line in text.split("\n"):
        escaped = line.startswith("\\")
        body = line[1:] if escaped else line
        digest, sep, rest = body.partition(" ")
        if len(digest) != 64 or not sep or rest[:1] not in (" ", "*"):
            continue
        try:
            int(digest, 16)
        except ValueError:
            continue
        path = rest[1:]
        entries[_unescape(path) if escaped else path] = digest.lower()
    return entries


def format_state(entries: Mapping[str, str]) -> str:
    """`sha256sum` lines for path -> sha256, sorted by path."""
    lines = []
    for path in sorted(entries):
        flag, escaped = _escape(path)
        lines.append(f"{flag}{entries[path]}  {escaped}\n")
    return "".join(lines)


def read_state(path: Path) -> dict[str, str]:
    """The state file's entries; a missing file is an empty state (everything is pending)."""
    try:
        return parse_state(path.read_text(encoding="utf-8", errors="surrogateescape"))
    except FileNotFoundError:
        return {}


def pending(traces: list[Trace], state: Mapping[str, str]) -> list[Trace]:
    """The traces whose current hash is not recorded for their path."""
    return [trace for trace in traces if state.get(trace.path) != trace.sha256]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock = path.with_name(path.name + ".lock")
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def update_state(path: Path, succeeded: Mapping[str, str]) -> None:
    """Record path -> sha256 for the traces that succeeded; atomic, and locked against a peer run."""
    if not succeeded:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        entries = read_state(path)
        entries.update(succeeded)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
                f.write(format_state(entries))
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise


# --- what a model sees ----------------------------------------------------------------------


def read_snapshot(path: Path, size: int, sha256: str) -> bytes:
    """The first `size` bytes of `path`, which must hash to `sha256` (a trace may only grow)."""
    with path.open("rb") as handle:
        data = handle.read(size)
    if len(data) != size or sha256_bytes(data) != sha256:
        raise TraceChanged(
            f"{path} no longer starts with the {size} bytes that were analysed (it was "
            "rewritten or truncated); it stays pending and is analysed again next run"
        )
    return data


def _leaves(value: Any, key: str, out: list[str]) -> None:
    if isinstance(value, str):
        if key not in NOISE_KEYS and value.strip() and (key, value) != ("type", "text"):
            out.append(f"{key}: {value}" if key else value)
    elif isinstance(value, dict):
        for child_key, child in value.items():
            _leaves(child, str(child_key), out)
    elif isinstance(value, list):
        for child in value:
            _leaves(child, key, out)


def _render_json_lines(text: str) -> str:
    records: list[str] = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            records.append(line.rstrip("\r"))
            continue
        out: list[str] = []
        _leaves(value, "", out)
        if out:
            records.append("\n".join(out))
    return "\n\n".join(records) + ("\n" if records else "")


def render(path: str | Path, data: bytes) -> str:
    """The text a model is shown for a trace, and that its quotes are checked against."""
    text = data.decode("utf-8", errors="replace")
    if str(path).lower().endswith(JSON_SUFFIXES):
        if str(path).lower().endswith(".json"):
            try:
                value = json.loads(text)
            except ValueError:
                return text
            out: list[str] = []
            _leaves(value, "", out)
            return "\n".join(out) + ("\n" if out else "")
        return _render_json_lines(text)
    return text

"""Session traces: which are pending, what text a model sees, and the state file.

A trace is any non-hidden regular file under the traces folder (searched
recursively; a file or folder whose name starts with `.` is ignored, and so
is a file with a NUL byte in its first 8 KiB, which is not a transcript).
Its *session* is its path relative to the traces folder, with `/`. A link
that leads outside the traces folder (to the home's `secrets/`, say) is
never opened: scan() returns it as refused, and the run names it. Every
trace is opened through agents.roots, which checks the open file's real
path, so a file swapped for such a link after listing is refused too.

The state file is `sha256sum` output: one `<64 hex>  <absolute path>` line
per trace that was analysed successfully, so `sha256sum -c` on it tells
which traces are unchanged. A trace is pending when the pair (its current
hash, its path) is not in the file: new, grown, changed, or failed last
time (a failed trace's new hash is never written). The hand run kept paths
only, so a trace that grew after it was read stayed "done"; a hash cannot.

Blank lines and `#` comment lines are allowed (`sha256sum -c` skips them
too) and comments are kept when the file is rewritten. Any other line means
the file is not a state file, perhaps another file named by mistake: it is
refused (StateFileError) before anything is written, because rewriting it
would replace its contents with state lines.

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
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiofiles

from agents.roots import Roots, real_path_of, replace_in
from room.errors import StepFailed

if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = [
    "StateFileError",
    "Trace",
    "TraceChanged",
    "TraceTooLarge",
    "check_state",
    "format_state",
    "parse_state",
    "pending",
    "read_snapshot",
    "read_state",
    "read_trace",
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


class StateFileError(ValueError):
    """The state file cannot be read as one, or not replaced where it is; nothing was written."""


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


def _sha256_file(handle: BinaryIO) -> tuple[str, int, bool]:
    digest = hashlib.sha256()
    size = 0
    binary = False
    while chunk := handle.read(1 << 20):
        if size < SNIFF_BYTES and b"\0" in chunk[: SNIFF_BYTES - size]:
            binary = True
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size, binary


@dataclass(frozen=True)
class Scan:
    """What a traces folder holds: the traces, the binary files skipped, the links refused."""

    traces: list[Trace]
    skipped: list[str]
    refused: list[str]  # `<path> -> <target>`: a link out of the folder, never opened

    def __iter__(self) -> Iterator[Any]:  # `found, skipped = scan(...)` as before
        return iter((self.traces, self.skipped))


def scan(root: Path) -> Scan:
    """Every trace under `root` sorted by session, the binary files, and the links refused."""
    if not root.is_dir():
        raise FileNotFoundError(
            f"the traces folder {root} does not exist; create it or point [backpass] traces "
            "(or --traces) at the folder holding session transcripts"
        )
    roots = Roots.single("traces", root)
    found: list[Trace] = []
    skipped: list[str] = []
    paths, refused = roots.walk("traces", root)
    for path in paths:
        session = path.relative_to(root).as_posix()
        try:
            with roots.open("traces", path, "the trace") as handle:
                real = real_path_of(handle.fileno(), path.resolve())
                digest, size, binary = _sha256_file(handle)
        except StepFailed:  # swapped for a link out of the folder since it was listed
            refused.append(f"{path} -> (swapped for a link out of the folder)")
            continue
        except OSError:  # not a regular file (a FIFO, a socket), or gone since the listing
            continue
        if binary:
            skipped.append(session)
            continue
        found.append(Trace(str(real), session, digest, size))
    found.sort(key=lambda trace: trace.session)
    return Scan(found, skipped, refused)


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


_STATE_LINE = re.compile(r"\\?[0-9A-Fa-f]{64} [ *].+", re.S)
SHOWN_CHARS = 60
SETTING = "--state (or [backpass] state)"  # what a message tells people to point elsewhere


def _bad_line(path: Path | None, number: int, line: str, setting: str) -> StateFileError:
    shown = line if len(line) <= SHOWN_CHARS else line[: SHOWN_CHARS - 1] + "…"
    where = f"{path} is not" if path else "this is not"
    return StateFileError(
        f"{where} a backpass state file: line {number} is {shown!r}, but every line must be "
        "`<64 hex digits>  <path>` (what sha256sum prints), blank, or a `#` comment. Nothing "
        f"was written. If this is another file, point {setting} at a new "
        "file; if it is the state file, fix or delete that line (a trace whose line is gone is "
        "analysed again)"
    )


def _parse(
    text: str, path: Path | None = None, setting: str = SETTING
) -> tuple[dict[str, str], list[str]]:
    """path -> sha256, and the comment lines; StateFileError at the first line that is neither."""
    entries: dict[str, str] = {}
    comments: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        if line.startswith("#"):
            comments.append(line)
            continue
        if not _STATE_LINE.fullmatch(line):
            raise _bad_line(path, number, line, setting)
        escaped = line.startswith("\\")
        body = line[1:] if escaped else line
        digest, path_text = body[:64], body[66:]
        entries[_unescape(path_text) if escaped else path_text] = digest.lower()
    return entries, comments


def parse_state(text: str) -> dict[str, str]:
    """path -> sha256 from `sha256sum` lines; blank and `#` lines skipped, any other refused."""
    return _parse(text)[0]


def format_state(entries: Mapping[str, str], comments: list[str] | tuple[str, ...] = ()) -> str:
    """`sha256sum` lines for path -> sha256, sorted by path, after the comment lines."""
    lines = [f"{comment}\n" for comment in comments]
    for path in sorted(entries):
        flag, escaped = _escape(path)
        lines.append(f"{flag}{entries[path]}  {escaped}\n")
    return "".join(lines)


def _read(
    path: Path, setting: str = SETTING, roots: Roots | None = None
) -> tuple[dict[str, str], list[str]]:
    """With `roots`, the file is read only from under the state root, checked once open: a
    state file swapped for a link to a secret would otherwise show its first line in an error."""
    try:
        if roots is None:
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
        else:
            raw = roots.read_bytes("state", path, "the state file")
            text = raw.decode("utf-8", errors="surrogateescape")
    except FileNotFoundError:
        return {}, []
    except IsADirectoryError:
        raise StateFileError(
            f"the state file {path} is a folder; point {setting} at a file in it, such as "
            f"{path / 'backpass.sha256'}"
        ) from None
    except OSError as exc:
        raise StateFileError(
            f"cannot read the state file {path} ({exc.strerror or exc}); nothing was written. "
            f"Fix its permissions, or point {setting} at another file"
        ) from None
    return _parse(text, path, setting)


def read_state(path: Path) -> dict[str, str]:
    """The state file's entries; a missing file is an empty state (everything is pending).

    A file that is not a state file raises StateFileError naming its first bad line."""
    return _read(path)[0]


def check_state(
    path: Path, *, write: bool = True, setting: str = SETTING, roots: Roots | None = None
) -> dict[str, str]:
    """The state file's entries, once sure a run may read it and (with `write`) replace it.

    Called before any work, so that a wrong path costs nothing: a folder, a device, a file
    that is not state lines, a folder that does not exist or one the run cannot write in
    raises StateFileError with the fix. A missing file in a usable folder is a first run.
    """
    try:
        _check_place(path, write, setting)
    except OSError as exc:  # a folder on the way that we may not look into
        raise StateFileError(
            f"cannot look at the state file {path} ({exc.strerror or exc}); fix the "
            f"permissions of the folders on its path or point {setting} at another file"
        ) from None
    return _read(path, setting, roots)[0]


def _check_place(path: Path, write: bool, setting: str) -> None:
    if path.is_dir():
        raise StateFileError(
            f"the state file {path} is a folder; point {setting} at a file in it, such as "
            f"{path / 'backpass.sha256'}"
        )
    if path.is_symlink() or path.exists():
        try:
            regular = stat.S_ISREG(path.stat().st_mode)
        except FileNotFoundError:  # a link to nothing
            regular = False
        if not regular:
            raise StateFileError(
                f"the state file {path} is not a regular file (a device, a socket or a link to "
                f"nothing); point {setting} at a file of its own"
            )
    folder = path.parent
    if not folder.is_dir():
        raise StateFileError(
            f"the state file's folder {folder} does not exist; create it (mkdir -p {folder}) "
            f"or point {setting} at a file in an existing folder"
        )
    if write and not os.access(folder, os.W_OK | os.X_OK):
        raise StateFileError(
            f"cannot write in the state file's folder {folder} (the file is replaced there, "
            f"atomically, after a run); fix the folder's permissions or point {setting} at a "
            "file in a folder you can write"
        )


def pending(traces: list[Trace], state: Mapping[str, str]) -> list[Trace]:
    """The traces whose current hash is not recorded for their path."""
    return [trace for trace in traces if state.get(trace.path) != trace.sha256]


@contextlib.contextmanager
def _locked(folder: int, name: str) -> Iterator[None]:
    """`<name>.lock` in the open folder, never through a link at that name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(f"{name}.lock", flags, 0o600, dir_fd=folder)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def update_state(path: Path, succeeded: Mapping[str, str], roots: Roots | None = None) -> None:
    """Record path -> sha256 for the traces that succeeded; atomic, and locked against a peer run.

    The file is checked before the lock file is made beside it, so a file that is not a state
    file is refused with nothing written next to it. The lock, the temporary file and the
    rename are made relative to the open folder (with `roots`: checked to lie under the
    state root once open), so no link swapped in on the way redirects the write."""
    if not succeeded:
        return
    _read(path, roots=roots)
    path.parent.mkdir(parents=True, exist_ok=True)
    if roots is not None:
        folder = roots.open_folder("state", path.parent, "the state file's folder")
    else:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with _locked(folder, path.name):
            entries, comments = _read(path, roots=roots)
            entries.update(succeeded)
            try:
                mode: int | None = stat.S_IMODE(os.stat(path.name, dir_fd=folder).st_mode)
            except FileNotFoundError:
                mode = None
            text = format_state(entries, comments)
            replace_in(folder, path.name, text.encode("utf-8", "surrogateescape"), 0o600, mode)
    finally:
        os.close(folder)


# --- what a model sees ----------------------------------------------------------------------


def read_snapshot(path: Path, size: int, sha256: str, roots: Roots | None = None) -> bytes:
    """The first `size` bytes of `path`, which must hash to `sha256` (a trace may only grow).

    With `roots`, the file is opened only if it lies under the traces root (OutsideRoot)."""
    opened = roots.open("traces", path, "the trace") if roots else path.open("rb")
    with opened as handle:
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


RAW_BYTES_PER_CHAR = 8  # a trace's file may be this many bytes per character max_trace_chars allows


class TraceTooLarge(ValueError):
    """A trace whose file is over its byte bound: refused from its size, never read."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} bytes on disk, over the {limit} bytes max_trace_chars allows")
        self.size, self.limit = size, limit


async def read_trace(path: Path, max_chars: int, roots: Roots) -> bytes:
    """A trace's bytes, at most RAW_BYTES_PER_CHAR × `max_chars` of them, read from inside
    the traces root (the opened file checked, not a path checked earlier).

    The bound is checked from the opened file's size before reading, and the read stops one
    byte past it (should the file grow meanwhile): a 100 MB one-line trace is never read into
    memory. The read runs on aiofiles' executor, so a large trace never blocks the lurker's
    event loop (its other steps, its cursor, its replies). Raise TraceTooLarge, OutsideRoot
    or OSError.
    """
    limit = RAW_BYTES_PER_CHAR * max_chars
    fd = roots.open_fd("traces", path, "the trace")
    async with aiofiles.open(fd, "rb") as handle:  # closes fd
        size = os.fstat(fd).st_size
        if size > limit:
            raise TraceTooLarge(size, limit)
        data = await handle.read(limit + 1)
    if len(data) > limit:
        raise TraceTooLarge(len(data), limit)
    return data


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

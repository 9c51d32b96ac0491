"""Editing trust.toml's [privileged] table in place: one line added or removed.

The operator's comments and layout stay as they are; the edited text is
loaded as a trust table before it replaces the file (written beside it,
fsynced, renamed over it), so a failed edit leaves the old file whole.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from room.errors import ConfigError
from trust import table

_HEADER = re.compile(r"^\s*\[\s*privileged\s*\]\s*(#.*)?$")
_ANY_HEADER = re.compile(r"^\s*\[")


def _line_of(nick: str) -> re.Pattern[str]:
    return re.compile(rf"^\s*(?:{re.escape(nick)}|\"{re.escape(nick)}\")\s*=")


def _table_span(lines: list[str]) -> tuple[int, int] | None:
    """The [privileged] table's header index and the index after its last line."""
    for i, line in enumerate(lines):
        if _HEADER.match(line):
            end = i + 1
            while end < len(lines) and not _ANY_HEADER.match(lines[end]):
                end += 1
            return i, end
    return None


def with_privileged(text: str, nick: str, how: str) -> str:
    """`text` with `nick = "how"` under [privileged] (the table made when missing)."""
    lines = text.splitlines()
    span = _table_span(lines)
    entry = f'{nick} = "{how}"'
    if span is None:
        return text.rstrip("\n") + f"\n\n[privileged]\n{entry}\n"
    start, end = span
    last = end
    while last > start + 1 and not lines[last - 1].strip():
        last -= 1  # after the table's last entry, before the blank lines that end it
    lines.insert(last, entry)
    return "\n".join(lines) + "\n"


def without_privileged(text: str, nick: str) -> str:
    """`text` with `nick`'s line under [privileged] removed."""
    lines = text.splitlines()
    span = _table_span(lines)
    if span is None:
        return text
    start, end = span
    pattern = _line_of(nick)
    kept = [line for i, line in enumerate(lines) if not (start < i < end and pattern.match(line))]
    return "\n".join(kept) + "\n"


def replace_table(path: Path, text: str, nick: str, how: str | None) -> table.TrustTable:
    """Write `text` over trust.toml once it loads and gives `nick` the proof `how` (None: not
    privileged); a ConfigError, the file untouched, when it does not."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    mode = os.stat(path).st_mode & 0o777
    fd = os.open(tmp, flags, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        loaded = table.load(tmp)
        proof = loaded.proof_of(nick)
        got = None if proof is None else (proof.public_text or proof.method)
        if got != how:
            raise ConfigError(
                f"editing {path} did not give {nick} the proof {how or 'none'} (it would be "
                f"{got or 'none'}): its [privileged] table has a form this edit does not know. "
                "Nothing was changed; edit the file by hand"
            )
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return table.load(path)

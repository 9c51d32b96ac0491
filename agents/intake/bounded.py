"""The one read of a file someone handed bullpen: its size checked before it is read, its
nesting before it is parsed.

A ticket, an eval case, a proof bundle or a checkpoint is a page, yet the
command reading it cannot know that until it looks: a 3 GB ticket read whole
took 6.3 GB of memory, and a `case.toml` of 100,000 nested arrays ended in a
RecursionError traceback (tomllib and json recurse once per level; a TOML
key of 30,000 dots costs tomllib quadratic time and memory). So the file's
size is taken from the open descriptor and refused over the bound before a
byte is read, at most bound + 1 bytes are read (a file that grows
meanwhile is refused too), and TOML is scanned for its nesting before
tomllib sees it. Every refusal is a UsageError (exit 2) that names the file,
what was found and the bound.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from room.errors import UsageError

__all__ = ["MAX_TOML_DEPTH", "load_toml", "read_bounded", "read_text", "toml_depth"]

MAX_TOML_DEPTH = 32  # tables, arrays and dotted-key parts open at once
_OPEN = os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK  # a FIFO must not hang it


def _size(count: int) -> str:
    return f"{count // 1024} KiB" if count >= 1024 else f"{count} bytes"


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of `path` (`what` names it for a person), or UsageError when it cannot be
    read, is not a regular file, or holds more than `limit` bytes, decided before reading."""
    try:
        fd = os.open(path, _OPEN)
    except OSError as exc:
        raise UsageError(
            f"cannot read {what} {path}: {exc.strerror}; give the path of a file"
        ) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UsageError(f"{what} {path} is not a regular file; give the path of a file")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > limit:
            raise UsageError(
                f"{what} {path} is {info.st_size} bytes, over the bound of {_size(limit)}; it "
                "was not read"
            )
        data = handle.read(limit + 1)  # should it grow meanwhile
    if len(data) > limit:
        raise UsageError(f"{what} {path} grew past the bound of {_size(limit)} while being read")
    return data


def read_text(path: Path, limit: int, what: str) -> str:
    """`read_bounded`, as UTF-8 text; UsageError when it is not."""
    try:
        return read_bounded(path, limit, what).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None


def toml_depth(text: str) -> int:
    """The deepest nesting `text` asks of a TOML parser: arrays and inline tables open at
    once plus the dots of the key or header being read, strings and comments left out. It
    counts a float's dot too: it may say more than the parser would need, never less."""
    depth = deepest = dots = 0
    index, end = 0, len(text)
    while index < end:
        char = text[index]
        if char == "#":
            stop = text.find("\n", index)
            index = end if stop < 0 else stop
            continue
        if char in "\"'":
            index = _string_end(text, index)
            continue
        if char in "[{":
            depth, dots = depth + 1, 0
        elif char in "]}":
            depth, dots = max(depth - 1, 0), 0
        elif char in "=,\n":
            dots = 0
        elif char == ".":
            dots += 1
        deepest = max(deepest, depth + dots)
        index += 1
    return deepest


def _string_end(text: str, start: int) -> int:
    """Where the TOML string opening at `start` ends (the index after it)."""
    quote, end = text[start], len(text)
    if text.startswith(quote * 3, start):  # multi-line: up to two more quotes may close it
        index = start + 3
        while (found := text.find(quote * 3, index)) >= 0:
            escapes = len(text[index:found]) - len(text[index:found].rstrip("\\"))
            if quote == '"' and escapes % 2:
                index = found + 1
                continue
            close = found + 3
            while close < end and close - found < 5 and text[close] == quote:
                close += 1
            return close
        return end
    index = start + 1
    while index < end:
        char = text[index]
        if char == "\n":
            return index
        if char == "\\" and quote == '"':
            index += 2
            continue
        if char == quote:
            return index + 1
        index += 1
    return end


def load_toml(path: Path, limit: int, what: str) -> dict[str, Any]:
    """A bounded TOML file, parsed; UsageError when it is too large, nested deeper than
    MAX_TOML_DEPTH, or not TOML."""
    text = read_text(path, limit, what)
    depth = toml_depth(text)
    if depth > MAX_TOML_DEPTH:
        raise UsageError(
            f"{what} {path} nests {depth} levels deep (tables, arrays and dotted keys), over "
            f"the bound of {MAX_TOML_DEPTH}; it was not parsed"
        )
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{what} {path}: not valid TOML ({exc})") from None

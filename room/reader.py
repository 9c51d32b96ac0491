"""Reading room.jsonl without loading it: from a byte offset or from a seq.

Seqs run 1, 2, 3 … in file order, so the line after a given seq is found by
bisecting byte offsets with a handful of small reads; from there lines are
read forward in chunks. Only whole lines (ending in `\\n`) are ever
returned: a line still being written is left for the next read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from room import strictjson
from room.chain import split_lines

CHUNK = 1 << 20
_SEQ = re.compile(rb'^\{"seq":(\d+),')


def seq_of(raw: bytes) -> int:
    """The seq of a stored line; -1 when the line is not a room message."""
    match = _SEQ.match(raw)
    if match:
        return int(match.group(1))
    try:
        obj = strictjson.loads(raw)
    except strictjson.JsonRejected:
        return -1
    seq = obj.get("seq") if isinstance(obj, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else -1


class RoomFile:
    """A read-only view of a room file; safe to use while a hub appends to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._ino: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            self._ino = os.fstat(self._fd).st_ino
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RoomFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def size(self) -> int:
        return os.fstat(self._open()).st_size

    def replaced(self) -> bool:
        """True when the path now names a different file than the one we hold open."""
        if self._fd is None:
            return False
        try:
            return os.stat(self.path).st_ino != self._ino
        except FileNotFoundError:
            return True

    def reopen(self) -> None:
        self.close()
        self._open()

    def pread(self, length: int, offset: int) -> bytes:
        return os.pread(self._open(), length, offset)

    def lines_from(self, offset: int, end: int | None = None) -> Iterator[tuple[int, bytes]]:
        """Yield (offset, line) for every whole line from `offset` up to `end`."""
        stop = self.size() if end is None else end
        pos = offset
        carry = b""
        while pos < stop:
            chunk = self.pread(min(CHUNK, stop - pos), pos)
            if not chunk:
                break
            start = pos - len(carry)
            lines, carry = split_lines(carry + chunk)
            pos += len(chunk)
            for line in lines:
                yield start, line
                start += len(line) + 1

    def lines_containing(
        self, needle: bytes, offset: int = 0, end: int | None = None, *, chunk: int = CHUNK
    ) -> Iterator[tuple[int, bytes]]:
        """Yield (offset, line) for the whole lines from `offset` up to `end` that contain
        `needle`: the same lines as filtering `lines_from`, without a Python step per line.

        A scan of the room for one thread used to test every line in Python, and a few such
        scans on worker threads held the GIL the event loop needs for every post. Here the
        search is `bytes.find` over a window of whole lines at most `chunk` long (each C call
        bounded, so no one holds the GIL long), and only the lines around a hit are cut out.
        """
        if not needle or b"\n" in needle:
            raise ValueError("the needle must be non-empty and hold no newline")
        stop = self.size() if end is None else end
        pos = offset
        while pos < stop:
            window = self.pread(min(chunk, stop - pos), pos)
            if not window:
                return
            last = window.rfind(b"\n")
            if last < 0:  # one line longer than the window: read it whole, like lines_from
                line = self._rest_of_line(window, pos + len(window), stop, chunk)
                if line is None:
                    return  # no newline before `stop`: a line still being written
                if needle in line:
                    yield pos, line
                pos += len(line) + 1
                continue
            hit = window.find(needle, 0, last)
            while hit >= 0:
                start = window.rfind(b"\n", 0, hit) + 1
                finish = window.find(b"\n", hit, last + 1)
                yield pos + start, window[start:finish]
                hit = window.find(needle, finish + 1, last)
            pos += last + 1

    def lines_holding(
        self, needles: list[bytes], offset: int = 0, end: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """The whole lines from `offset` up to `end` that contain every one of `needles` (a
        Filter's prefilter): found by the first with `lines_containing`, checked for the rest;
        with no needles, every line."""
        if not needles:
            yield from self.lines_from(offset, end)
            return
        first, rest = needles[0], needles[1:]
        for start, line in self.lines_containing(first, offset, end):
            if all(n in line for n in rest):
                yield start, line

    def _rest_of_line(self, head: bytes, pos: int, stop: int, chunk: int) -> bytes | None:
        """The line that starts with `head` (which holds no newline) read on from `pos` to its
        newline; None when the file has none before `stop`."""
        parts = [head]
        while pos < stop:
            more = self.pread(min(chunk, stop - pos), pos)
            if not more:
                return None
            cut = more.find(b"\n")
            if cut >= 0:
                parts.append(more[:cut])
                return b"".join(parts)
            parts.append(more)
            pos += len(more)
        return None

    def line_end(self, offset: int, end: int | None = None) -> int:
        """Offset just past the whole lines readable from `offset` (where a reader resumes)."""
        last = offset
        for start, line in self.lines_from(offset, end):
            last = start + len(line) + 1
        return last

    def _next_line_start(self, pos: int, end: int) -> int:
        if pos == 0:
            return 0
        probe = pos - 1
        while probe < end:
            chunk = self.pread(min(65536, end - probe), probe)
            if not chunk:
                return end
            idx = chunk.find(b"\n")
            if idx >= 0:
                return probe + idx + 1
            probe += len(chunk)
        return end

    def _line_at(self, start: int, end: int) -> bytes:
        buf = b""
        pos = start
        while pos < end:
            chunk = self.pread(min(65536, end - pos), pos)
            if not chunk:
                break
            idx = chunk.find(b"\n")
            if idx >= 0:
                return buf + chunk[:idx]
            buf += chunk
            pos += len(chunk)
        return buf

    def offset_after(self, after: int, end: int | None = None) -> int:
        """Byte offset of the first line whose seq is greater than `after`."""
        stop = self.size() if end is None else end
        if after <= 0:
            return 0
        near_tail = self._offset_near_tail(after, stop)
        if near_tail is not None:
            return near_tail
        lo, hi = 0, stop
        while hi - lo > 65536:
            mid = (lo + hi) // 2
            start = self._next_line_start(mid, hi)
            if start >= hi:
                hi = mid
                continue
            seq = seq_of(self._line_at(start, hi))
            if 0 <= seq <= after:
                lo = start
            else:
                hi = start
        for start, line in self.lines_from(lo, stop):
            if seq_of(line) > after:
                return start
        return self.line_end(lo, stop)

    def _offset_near_tail(self, after: int, stop: int, reach: int = 256) -> int | None:
        """When `after` is within `reach` lines of the end, walk back from the tail instead."""
        last = self.last_line(stop)
        if last is None:
            return None
        start, raw = last
        last_seq = seq_of(raw)
        if last_seq < 0 or not 0 <= last_seq - after <= reach:
            return None
        if last_seq == after:
            return start + len(raw) + 1
        for _ in range(last_seq - after - 1):
            if start == 0:
                return None
            start = self._last_newline_before(start - 1)
        return start

    def last_line(self, end: int | None = None) -> tuple[int, bytes] | None:
        """The last whole line and its offset, read from the tail."""
        stop = self.size() if end is None else end
        if stop == 0:
            return None
        if self.pread(1, stop - 1) != b"\n":
            stop = self._last_newline_before(stop)
            if stop <= 0:
                return None
        start = self._last_newline_before(stop - 1)
        return start, self.pread(stop - 1 - start, start)

    def _last_newline_before(self, pos: int) -> int:
        """Offset just after the last newline before `pos`, or 0."""
        while pos > 0:
            begin = max(0, pos - 65536)
            chunk = self.pread(pos - begin, begin)
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                return begin + idx + 1
            pos = begin
        return 0

    def last_seq(self, end: int | None = None) -> int:
        found = self.last_line(end)
        return 0 if found is None else seq_of(found[1])

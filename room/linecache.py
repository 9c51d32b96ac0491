"""The hub's cache of the room's newest lines, bounded in bytes as well as in lines.

Both engines keep one (room/jsonl.py, room/jetstream/view.py) so that the
readers at the head (every lurker's long-poll) never touch the disk or the
stream. Bounded in lines only, it held 8,192 lines whatever their size: 3,526
unverified posts of 368 kB took a hub from 60 MB to 1.36 GB (issue 23). Here
the oldest lines go as soon as the cached bytes pass `max_bytes` ([hub]
cache_max_bytes); a read of an evicted line is answered from the file or the
stream, as for any line older than the cache. The newest line stays even when
it alone is over the bound, so a reader at the head is still served from memory.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

DEFAULT_MAX_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_LINES = 8192


class _Line(Protocol):
    seq: int
    raw: bytes


Entry = TypeVar("Entry", bound=_Line)


class LineCache(Generic[Entry]):
    """Consecutive lines, oldest first, at most `max_lines` and about `max_bytes` of them."""

    def __init__(
        self, max_bytes: int = DEFAULT_MAX_BYTES, max_lines: int = DEFAULT_MAX_LINES
    ) -> None:
        if max_bytes <= 0 or max_lines <= 0:
            raise ValueError("a line cache needs room for at least one line and one byte")
        self.max_bytes = max_bytes
        self.max_lines = max_lines
        self._lines: deque[Entry] = deque()
        self.nbytes = 0  # the raw bytes of the lines held (not Python's overhead per line)

    def append(self, entry: Entry) -> None:
        """Add the next line; evict the oldest while over either bound (keeping this one)."""
        self._lines.append(entry)
        self.nbytes += len(entry.raw)
        while len(self._lines) > 1 and (
            self.nbytes > self.max_bytes or len(self._lines) > self.max_lines
        ):
            self.nbytes -= len(self._lines.popleft().raw)

    def get(self, seq: int) -> Entry | None:
        """The cached line at `seq`, or None when it is not (or no longer) cached."""
        lines = self._lines
        if lines and lines[0].seq <= seq <= lines[-1].seq:
            return lines[seq - lines[0].seq]
        return None

    @property
    def first_seq(self) -> int | None:
        """The oldest cached seq (None: nothing cached)."""
        return self._lines[0].seq if self._lines else None

    def holds_after(self, after: int) -> bool:
        """True when every line after `after` that exists is cached (a read needs no scan)."""
        return bool(self._lines) and after + 1 >= self._lines[0].seq

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)

    def __bool__(self) -> bool:
        return bool(self._lines)

"""Reading the room off the writer's path: one scan thread, thread scans shared and cheap.

Before this, a read of a thread the hub had not indexed scanned the whole
room on asyncio's default executor — the same threads that write and fsync
each batch — so 256 such reads queued every acknowledgement behind 256 full
scans. Now:

- scans and file reads run on their own single thread (`Scanner.run`);
  the writer has its own executor (room/jsonl.py), so a read never waits
  in front of a write;
- a thread scan looks for the thread's exact JSON bytes with `bytes.find`
  over 1 MiB chunks (in C, between which the GIL is free) and parses only
  the lines it finds, instead of splitting and testing every line in Python;
- concurrent reads of the same unindexed thread share one scan;
- lines for an indexed thread that have left the cache are fetched on the
  scan thread too, from the file up to the size it had when the read began
  (bytes the hub already fsynced never change), so the event loop that
  acknowledges posts does no file I/O for a reader.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from room import strictjson
from room.log import Filter
from room.message import parse_line
from room.reader import CHUNK, RoomFile

T = TypeVar("T")


def lines_with(reader: RoomFile, needle: bytes, end: int) -> Iterator[bytes]:
    """Every whole line before `end` that contains `needle`, found with `bytes.find`."""
    pos, carry = 0, b""
    while pos < end:
        chunk = reader.pread(min(CHUNK, end - pos), pos)
        if not chunk:
            break
        pos += len(chunk)
        blob = carry + chunk if carry else chunk
        cut = blob.rfind(b"\n") + 1
        blob, carry = blob[:cut], blob[cut:]
        hit = blob.find(needle)
        while hit >= 0:
            start = blob.rfind(b"\n", 0, hit) + 1
            stop = blob.find(b"\n", hit)
            yield blob[start:stop]
            hit = blob.find(needle, stop)


class Scanner:
    """The room's reads that touch the file, on one thread of their own, and its thread index."""

    def __init__(self, reader: RoomFile, index_size: int) -> None:
        self._reader = reader
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="room-scan")
        self.index: OrderedDict[str, list[int]] = OrderedDict()
        self._index_size = index_size
        self._pending: dict[str, asyncio.Future[tuple[list[int], int]]] = {}

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def thread_seqs(self, thread: str, end: int, head: int) -> tuple[list[int], int]:
        """The seqs of every line in `thread` before byte `end`, and `head` (the scan thread)."""
        needle = b'"thread":' + strictjson.dumps(thread).encode()
        seqs = []
        for raw in lines_with(self._reader, needle, end):
            try:
                message = parse_line(raw)
            except ValueError:
                continue
            if message.thread == thread:  # not a "thread" key inside a post's data
                seqs.append(message.seq)
        return seqs, head

    async def scan(self, thread: str, head: int, end: int) -> tuple[list[int], int]:
        """The thread's seqs from one scan shared by every reader waiting on it, and the
        head that scan covers (it may have started before this read, at an earlier head)."""
        pending = self._pending.get(thread)
        if pending is None:
            pending = asyncio.ensure_future(self.run(self.thread_seqs, thread, end, head))
            self._pending[thread] = pending
            pending.add_done_callback(lambda _: self._pending.pop(thread, None))
        return await asyncio.shield(pending)

    def remember(self, thread: str, seqs: list[int]) -> None:
        self.index[thread] = seqs
        while len(self.index) > self._index_size:
            self.index.popitem(last=False)

    def file_lines(self, seqs: list[int], end: int, flt: Filter, limit: int) -> list[bytes]:
        """Up to `limit` lines at `seqs` that match `flt`, read from the file (scan thread)."""
        narrower = flt.to is not None or flt.sender is not None
        lines: list[bytes] = []
        for seq in seqs:
            offset = self._reader.offset_after(seq - 1, end)
            if offset >= end:
                continue
            raw = self._reader._line_at(offset, end)
            if narrower:
                message = parse_line(raw)
                if not flt.matches(message.from_, message.to, message.thread):
                    continue
            lines.append(raw)
            if len(lines) == limit:
                break
        return lines

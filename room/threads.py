"""The hub's thread index: each recently read thread's seqs, and which threads the room may hold.

Every run starts a thread, and the first read of a thread the hub has not
indexed used to scan the whole room for it: with 60,000 lines anywhere in the
room, each new run paid for a scan. The hub surveys the room once (off its
event loop) to fill this filter, then adds each thread as its lines are
written. A thread the filter has never seen has no lines before now, so its
index starts empty and no scan is needed; a false "maybe" only costs the scan
it always cost. Bounded: 1 MiB whatever the room holds.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable

import structlog

from room.log import Filter, ReadResult
from room.message import parse_line
from room.reader import RoomFile, seq_of

log = structlog.get_logger("room.threads")

BITS = 1 << 23  # 1 MiB: about a 2% false "maybe" at a million threads
HASHES = 7
# Every `"thread":"…"` in a stored line; a line holds its own thread among them (a superset is
# safe: a thread wrongly marked only costs a scan).
_THREAD = re.compile(rb'"thread":("(?:[^"\\]|\\.)*")')


class ThreadFilter:
    """A Bloom filter of thread names; `complete` once every stored line is in it."""

    def __init__(self) -> None:
        self._bits = bytearray(BITS // 8)
        self.complete = False

    @staticmethod
    def _positions(thread: str) -> list[int]:
        digest = hashlib.blake2b(thread.encode("utf-8", "surrogatepass"), digest_size=32).digest()
        return [int.from_bytes(digest[4 * i : 4 * i + 4], "little") % BITS for i in range(HASHES)]

    def add(self, thread: str) -> None:
        for bit in self._positions(thread):
            self._bits[bit >> 3] |= 1 << (bit & 7)

    def may_hold(self, thread: str) -> bool:
        """False only when the room holds no line of `thread` (once complete)."""
        return not self.complete or all(
            self._bits[bit >> 3] & (1 << (bit & 7)) for bit in self._positions(thread)
        )

    def merge(self, other: ThreadFilter) -> None:
        """Add every thread `other` holds (on the event loop: never while another thread adds)."""
        size = len(self._bits)
        both = int.from_bytes(self._bits, "little") | int.from_bytes(other._bits, "little")
        self._bits = bytearray(both.to_bytes(size, "little"))

    def add_line(self, raw: bytes) -> None:
        """Every thread a stored line may be in."""
        for quoted in _THREAD.findall(raw):
            try:
                self.add(json.loads(quoted))
            except ValueError:
                continue


class ThreadIndex:
    """The seqs of the `size` threads read most recently, and the filter of all threads.

    Used on the hub's event loop only; the survey reads the room on a worker thread
    into its own filter, merged here when it is done.
    """

    def __init__(self, size: int) -> None:
        self._seqs: OrderedDict[str, list[int]] = OrderedDict()
        self._size = size
        self._known: ThreadFilter | None = None  # None until a survey is first asked for
        self._survey: asyncio.Future[None] | None = None

    def get(self, thread: str) -> list[int] | None:
        seqs = self._seqs.get(thread)
        if seqs is not None:
            self._seqs.move_to_end(thread)
        return seqs

    def put(self, thread: str, seqs: list[int]) -> list[int]:
        self._seqs[thread] = seqs
        while len(self._seqs) > self._size:
            self._seqs.popitem(last=False)
        return seqs

    def stored(self, thread: str, seq: int) -> None:
        """A line of `thread` was stored at `seq` (call in seq order)."""
        known = self._known
        if known is not None:
            if thread not in self._seqs and not known.may_hold(thread):
                self.put(thread, [])  # a new thread: nothing before this line
            known.add(thread)
        seqs = self._seqs.get(thread)
        if seqs is not None:
            seqs.append(seq)

    async def absent(self, thread: str, lines: Callable[[], Iterable[bytes]]) -> bool:
        """True when the room holds no line of `thread`. The first call surveys `lines`
        (the room as stored now, read on a worker thread); lines stored meanwhile come
        through `stored`."""
        if self._survey is None:
            self._known = ThreadFilter()
            self._survey = asyncio.ensure_future(self._run_survey(lines))
        await asyncio.shield(self._survey)
        assert self._known is not None
        return not self._known.may_hold(thread)

    async def _run_survey(self, lines: Callable[[], Iterable[bytes]]) -> None:
        surveyed = ThreadFilter()

        def survey() -> None:
            for raw in lines():
                surveyed.add_line(raw)

        try:
            await asyncio.to_thread(survey)
        except Exception as exc:  # unreadable: every thread stays a "maybe", as before
            log.warning("could not survey the room's threads", error=str(exc))
            return
        assert self._known is not None
        self._known.merge(surveyed)  # here, on the loop, where stored lines are added
        self._known.complete = True


def pick(
    reader: RoomFile, seqs: list[int], thread: str, flt: Filter | None, limit: int, end: int
) -> ReadResult:
    """The lines at `seqs` (ascending, all in `thread`) that match `flt`, in one pass from the
    first: a thread's old lines cost one read of the file, not one search per line, and that
    read jumps between the lines holding the thread's key (bytes.find), not line by line."""
    wanted, last = set(seqs), seqs[-1]
    needles = (flt or Filter(thread=thread)).prefilter()
    lines: list[bytes] = []
    offset = reader.offset_after(seqs[0] - 1, end)
    past = reader.offset_after(last, end)  # the scan stops at the first line after `last`
    for _, raw in reader.lines_holding(needles, offset, past):
        seq = seq_of(raw)
        if seq not in wanted:
            continue
        if flt is not None:
            message = parse_line(raw)
            if not flt.matches(message.from_, message.to, message.thread, message.verified):
                continue
        lines.append(raw)
        if len(lines) == limit:
            return ReadResult(lines, seq)
    return ReadResult(lines, last)

"""The hub's view of the room's stream: what this hub has seen, in order, and reading it.

It exists apart from the append path (room/jetstream/append.py) because every
hub holds one whichever hub appended: an ordered consumer follows the whole
stream and keeps the head, a cache of recent lines and a thread index
current, wakes long-polling readers, and tells a waiting poster when the line
it stored is in the view (read-your-writes). /read and line_at are served
from it: the cache first, the stream itself (filtered by subject when it can)
for older lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import structlog
from nats.aio.msg import Msg
from nats.js import api
from nats.js.client import JetStreamContext

from room.chain import GENESIS, line_hash
from room.errors import DurabilityError
from room.jetstream.stream import StreamSettings, room_line, scan, why_not_a_line
from room.linecache import LineCache
from room.log import Filter, Head, ReadResult, Stored
from room.message import Message

log = structlog.get_logger("room.jetstream.view")


class _Line:
    """A stream message as this hub's view holds it; `message` is None for a non-room line."""

    __slots__ = ("raw", "sender", "seq", "thread", "to", "valid", "verified")

    def __init__(self, seq: int, raw: bytes, message: Message | None) -> None:
        self.seq = seq
        self.raw = raw
        self.valid = message is not None
        self.sender = message.from_ if message is not None else ""
        self.to = message.to if message is not None else ""
        self.thread = message.thread if message is not None else None
        self.verified = message.verified if message is not None else False

    def stored(self) -> Stored:
        return Stored(self.seq, self.raw, self.sender, self.to, self.thread, self.verified)


class StreamView:
    """This hub's ordered, gap-free view of the stream; `wake` is called for every new line."""

    def __init__(self, settings: StreamSettings, wake: Callable[[], None]) -> None:
        self.settings = settings
        self._wake = wake
        self._js: JetStreamContext | None = None
        self._follower: Any = None
        self._cache: LineCache[_Line] = LineCache(settings.cache_max_bytes, settings.cache_lines)
        self._threads: OrderedDict[str, list[int]] = OrderedDict()
        self.head = Head(0, GENESIS)  # what this hub has seen, in order, with nothing missing
        self._confirm: dict[int, list[asyncio.Future[None]]] = {}
        self._last_change = time.monotonic()
        self.chain_breaks = 0
        self.on_stored: Callable[[list[Stored]], None] | None = None  # RoomLog.on_stored

    @property
    def js(self) -> JetStreamContext:
        assert self._js is not None, "start() the view first"
        return self._js

    # -- following the stream ----------------------------------------------

    async def start(self, js: JetStreamContext, start: int) -> None:
        """Follow the stream from seq `start` (the lines before it are not cached)."""
        self._js = js
        if start > 1:
            before = await self.js.get_msg(self.settings.stream, start - 1)
            self.head = Head(start - 1, line_hash(before.data or b""))
        else:
            self.head = Head(0, GENESIS)
        self._follower = await self._subscribe_from(start)

    async def _subscribe_from(self, start: int) -> Any:
        """An ordered push consumer handing every line from `start` on to `_on_line`."""
        return await self.js.subscribe(
            self.settings.subjects,
            stream=self.settings.stream,
            cb=self._on_line,
            ordered_consumer=True,
            idle_heartbeat=1.0,
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            config=api.ConsumerConfig(opt_start_seq=start),
        )

    async def _on_line(self, msg: Msg) -> None:
        seq = msg.metadata.sequence.stream
        if seq <= self.head.seq:
            return  # delivered again after the consumer was reset
        raw = msg.data
        message = room_line(seq, raw)
        if message is None:
            self.chain_breaks += 1
            log.error(
                "the stream holds a message that is not a room line; /read skips it. Something "
                "other than a hub published to the stream: run `bullpen audit`",
                stream_seq=seq,
                why=why_not_a_line(seq, raw),
            )
        elif seq != self.head.seq + 1 or message.prev != self.head.hash:
            self.chain_breaks += 1
            log.error(
                "the stream does not chain here; run `bullpen audit`",
                stream_seq=seq,
                line_seq=message.seq,
                after=self.head.seq,
            )
        line = _Line(seq, raw, message)
        self._cache.append(line)
        if line.thread is not None and line.thread in self._threads:
            self._threads[line.thread].append(seq)
        self.head = Head(seq, line_hash(raw))
        self._last_change = time.monotonic()
        if self.on_stored is not None:
            self.on_stored([line.stored()])
        for waiting in [s for s in self._confirm if s <= seq]:
            for future in self._confirm.pop(waiting):
                if not future.done():
                    future.set_result(None)
        self._wake()

    def holds(self, seq: int) -> asyncio.Future[None]:
        """A future done once the view has reached `seq` (not done yet: the view is short of it)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._confirm.setdefault(seq, []).append(future)
        return future

    async def until(self, seq: int, timeout: float) -> None:
        """Wait until the view has reached `seq`; DurabilityError when it does not in time."""
        if self.head.seq >= seq:
            return
        future = self.holds(seq)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise DurabilityError(
                f"this hub's view of the stream did not reach seq {seq} within {timeout:g} s "
                f"(it is at {self.head.seq}); the NATS servers may be unreachable"
            ) from None

    async def watch(self, closing: Callable[[], bool]) -> None:
        """Restart the follower when it lags behind what JetStream acknowledged for too long.

        The ordered consumer resets itself after missed heartbeats; this is the
        safety net for a reset that failed while the cluster elected a leader.
        """
        while not closing():
            await asyncio.sleep(1.0)
            wanted = min(self._confirm, default=0)
            if not wanted or time.monotonic() - self._last_change < 3.0:
                continue
            log.warning("the stream follower is stuck; starting it again", at=self.head.seq)
            try:
                with contextlib.suppress(Exception):
                    await self._follower.unsubscribe()
                self._follower = await self._subscribe_from(self.head.seq + 1)
                self._last_change = time.monotonic()
            except Exception as exc:
                log.warning("restarting the stream follower failed; trying again", error=str(exc))

    # -- reading ---------------------------------------------------------------

    def cached(self, seq: int) -> _Line | None:
        return self._cache.get(seq)

    async def read(self, after: int, limit: int, flt: Filter) -> ReadResult:
        head = self.head.seq
        if after >= head or limit <= 0:
            return ReadResult([], head)
        if flt.thread is not None:
            return await self._read_thread(after, limit, flt, head)
        if self._cache.holds_after(after):
            lines = []
            for entry in self._cache:
                if entry.seq > head:
                    break
                if not entry.valid:
                    continue  # logged when it arrived; `bullpen audit` reports it
                if entry.seq > after and flt.matches(
                    entry.sender, entry.to, entry.thread, entry.verified
                ):
                    lines.append(entry.raw)
                    if len(lines) == limit:
                        return ReadResult(lines, entry.seq)
            return ReadResult(lines, head)
        return await self._scan(after, limit, flt, head)

    async def _scan(self, after: int, limit: int, flt: Filter, head: int) -> ReadResult:
        """Lines older than the cache, read from the stream (filtered by subject when it can)."""
        subject = None
        if flt.to is not None:
            subject = self.settings.addressed_to(flt.to.removeprefix("@"))
        needles = flt.prefilter()
        lines: list[bytes] = []
        async for seq, raw in scan(self.js, self.settings, after + 1, head, subject):
            if needles and not all(n in raw for n in needles):
                continue
            message = room_line(seq, raw)
            if message is None:
                log.warning(
                    "skipping a stream message that is not a room line",
                    stream_seq=seq,
                    why=why_not_a_line(seq, raw),
                )
                continue
            if not flt.matches(message.from_, message.to, message.thread, message.verified):
                continue
            lines.append(raw)
            if len(lines) == limit:
                return ReadResult(lines, seq)
        return ReadResult(lines, head)

    async def _read_thread(self, after: int, limit: int, flt: Filter, head: int) -> ReadResult:
        thread = flt.thread
        assert thread is not None
        seqs = self._threads.get(thread)
        if seqs is None:
            found = await self._scan(0, 1 << 62, Filter(thread=thread), head)
            seqs = [json.loads(raw)["seq"] for raw in found.lines]  # room lines: scan checked
            # Lines the follower added while the scan ran are in the cache.
            seqs += [c.seq for c in self._cache if c.seq > head and c.valid and c.thread == thread]
            self._threads[thread] = seqs
            while len(self._threads) > self.settings.thread_index_size:
                self._threads.popitem(last=False)
        else:
            self._threads.move_to_end(thread)
        lines: list[bytes] = []
        for seq in [s for s in seqs if after < s <= head]:
            raw = await self.line_for(seq)
            message = room_line(seq, raw)
            if message is None or not flt.matches(
                message.from_, message.to, message.thread, message.verified
            ):
                continue
            lines.append(raw)
            if len(lines) == limit:
                return ReadResult(lines, seq)
        return ReadResult(lines, head)

    async def line_at(self, seq: int) -> bytes | None:
        if not 1 <= seq <= self.head.seq:
            return None
        return await self.line_for(seq)

    async def line_for(self, seq: int) -> bytes:
        """The bytes at `seq`, from the cache or else the stream (the view holds `seq`)."""
        line = self.cached(seq)
        if line is not None:
            return line.raw
        msg = await self.js.get_msg(self.settings.stream, seq)
        return msg.data or b""


__all__ = ["StreamView"]

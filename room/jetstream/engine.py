"""The room on NATS JetStream: the same RoomLog, backed by a replicated stream.

When a society outgrows one hub and one disk, the log is an existing
distributed engine, not a home-made cluster. One stream holds the room, one
message per line, and the stream sequence *is* the line's `seq`:

- Subjects: `<prefix>.to.<nick>.<type>`, so a lurker's durable consumer can
  take only what is addressed to it (room/jetstream/follow.py).
- Several hubs on several hosts may append. Each publishes with
  `Nats-Expected-Last-Sequence` (the line's seq - 1), one line in flight at
  a time, so a line lands only at the seq it was stamped with, right after
  the line its `prev` names — the chain stays unbroken. On a conflict the
  hub reads the stream's real last line and stamps the line again on top
  of it. (With `pipeline` > 1 the 2nd… line of a batch also carries
  `Nats-Expected-Last-Msg-Id`; see StreamSettings.pipeline for why that is
  not the default.)
- `Nats-Msg-Id` is the line's id and stays the same across every retry and
  re-stamp, so a post whose acknowledgement was lost is stored once.
- Every hub follows the whole stream with an ordered consumer, which keeps
  its head, a cache of recent lines and a thread index current, and wakes
  long-polling readers whichever hub appended. A post is answered only
  after JetStream acknowledged it *and* this hub's view holds it, so a
  client that reads right after posting sees its line.

Durability is the NATS servers' (docs/scaling.md): an acknowledged publish
is on a quorum of replicas, and fsynced before the acknowledgement only
when the servers run with `sync_interval: always` (nats-server >= 2.10).
The hub warns at start-up when the server it reached is older.

Fail-stop, like the JSONL engine's fsync failure: a post the servers did not
confirm within `append_deadline_s` may or may not be stored, and the NATS
client still holds it to send on reconnecting. The poster is told so (503),
the hub drops what the client holds, stops acknowledging and exits (70), so
nothing it was holding lands after the poster was told it may not have.
While the servers are merely unreachable, /health says so (503) and posts
wait for them, up to that deadline.

Only hubs should publish to the stream. A message that is not a room line
at its seq (a client past the gate) is logged, skipped by /read — whose
last_seq still covers it — and fails `bullpen audit`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

import nats.errors
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import api
from nats.js.client import JetStreamContext

from room.chain import GENESIS, line_hash
from room.errors import DurabilityError, RoomCorrupt
from room.ids import IdClock
from room.jetstream.stream import (
    API_TIMEOUT_S,
    WRONG_LAST_MSG_ID,
    WRONG_LAST_SEQUENCE,
    Publisher,
    StreamSettings,
    connect,
    drop_unsent,
    ensure_stream,
    nats_failure,
    room_line,
    scan,
    stream_tip,
    sync_warning,
    why_not_a_line,
)
from room.log import Draft, Filter, Head, OpenReport, ReadResult, RoomLog, Stored, build_line
from room.message import Message

log = structlog.get_logger("room.jetstream.engine")

# How long a stored post waits for this hub's view to show it before it is answered anyway.
CONFIRM_WAIT_S = 5.0
# The hub's first connect waits longer than a command's: a hub that gives up sooner is
# restarted by systemd (RestartSec=2) often enough to hit the unit's start limit (5 starts
# in 120 s) and then stays down after NATS is back; 30 s keeps it under that limit.
HUB_CONNECT_WAIT_S = 30.0
# How often the hub asks the stream whether it answers, for /health.
PROBE_EVERY_S = 2.0
PROBE_TIMEOUT_S = 5.0


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


@dataclass
class _Pending:
    draft: Draft
    future: asyncio.Future[Stored]
    ulid: str
    ms: int
    deadline: float
    seq: int = 0  # as stamped in the latest attempt
    raw: bytes = b""
    stored_at: int = 0  # the seq JetStream acknowledged it at
    duplicate: bool = False  # stored by an earlier attempt, with that attempt's bytes


def _left(todo: list[_Pending]) -> float:
    """How long the most urgent post may still wait (a little at least, for one answer)."""
    return max(0.25, min(p.deadline for p in todo) - time.monotonic())


class JetStreamLog(RoomLog):
    """The room as a JetStream stream; any number of hubs may hold one of these on it."""

    def __init__(self, settings: StreamSettings, *, name: str = "bullpen-hub") -> None:
        self.settings = settings
        self._name = name
        self._nc: NATS | None = None
        self._js: JetStreamContext | None = None
        self._publisher: Publisher | None = None
        self._ids = IdClock()
        self._queue: list[_Pending] = []
        self._kick: asyncio.Event | None = None
        self._writer_task: asyncio.Task[None] | None = None
        self._follower: Any = None
        self._cache: deque[_Line] = deque(maxlen=settings.cache_lines)
        self._threads: OrderedDict[str, list[int]] = OrderedDict()
        self._view = Head(0, GENESIS)  # what this hub has seen, in order, with nothing missing
        self._confirm: dict[int, list[asyncio.Future[None]]] = {}
        self._closing = False
        self._background: set[asyncio.Future[None]] = set()
        self.nonces: Any = None  # a trust.streamnonces.StreamNonces, bound at open()
        self._last_view_change = time.monotonic()
        self.chain_breaks = 0
        self._fatal: DurabilityError | None = None
        self._stream_trouble: str | None = None  # the last probe's failure, None when it answered

    @property
    def head(self) -> Head:
        return self._view

    @property
    def failed(self) -> DurabilityError | None:
        """Set once a post could not be confirmed: the hub stops acknowledging and exits."""
        return self._fatal

    @property
    def unavailable(self) -> str | None:
        """Why a post cannot be stored right now (NATS unreachable, the stream not answering)."""
        if self._nc is not None and not self._nc.is_connected and not self._closing:
            return (
                f"the hub is not connected to the NATS servers ({', '.join(self.settings.servers)}) "
                "and is reconnecting; posts wait for them, up to "
                f"{self.settings.append_deadline_s:g} s"
            )
        return self._stream_trouble

    def describe(self) -> dict[str, str]:
        """Where the room is, for the hub's `hub listening` line."""
        return {"stream": self.settings.stream, "servers": ", ".join(self.settings.servers)}

    @property
    def js(self) -> JetStreamContext:
        assert self._js is not None, "open() the log first"
        return self._js

    @property
    def nc(self) -> NATS:
        assert self._nc is not None, "open() the log first"
        return self._nc

    async def open(self) -> OpenReport:
        """Connect, check the stream and catch up with it; raise ConfigError or LogError, never NATS's."""
        self._nc = await connect(
            self.settings,
            self._name,
            deadline_s=max(self.settings.connect_deadline_s, HUB_CONNECT_WAIT_S),
        )
        version = str(self._nc._server_info.get("version") or "unknown")  # the server's INFO
        warning = sync_warning(version)
        if warning is not None:
            url = self._nc.connected_url
            log.warning(warning, version=version, server=url.netloc if url else "")
        try:
            self._js = self._nc.jetstream(timeout=API_TIMEOUT_S)
            info, notes = await ensure_stream(self._js, self.settings)
            await self._check_stream(info)
            if self.nonces is not None:
                await self.nonces.bind(self._js, self.settings)
            self._publisher = Publisher(self._nc)
            await self._publisher.start()
            self._kick = asyncio.Event()
            last = info.state.last_seq
            await self._start_follower(max(1, last - self.settings.cache_lines + 1))
            await self._until_view(last, 30.0)
        except (nats.errors.Error, TimeoutError) as exc:
            await self._nc.close()
            raise nats_failure(exc, self.settings, "opening the room's stream") from None
        except BaseException:
            await self._nc.close()
            raise
        self._writer_task = asyncio.create_task(self._writer(), name="stream-writer")
        self._watchdog = asyncio.create_task(self._watch_follower(), name="stream-watchdog")
        self._prober = asyncio.create_task(self._probe(), name="stream-probe")
        return OpenReport(self._view, notes)

    async def _check_stream(self, info: api.StreamInfo) -> None:
        """A stream that is not a whole room from seq 1 cannot be served: say so before starting."""
        state = info.state
        if state.messages == 0:
            if state.last_seq:
                raise RoomCorrupt(
                    f"the stream {self.settings.stream!r} is empty but its last seq is "
                    f"{state.last_seq}: lines were removed. A room's stream must start at seq 1"
                )
            return
        if state.first_seq != 1 or state.messages != state.last_seq:
            raise RoomCorrupt(
                f"the stream {self.settings.stream!r} holds {state.messages} messages from seq "
                f"{state.first_seq} to {state.last_seq}: lines are missing. Run `bullpen audit` "
                "to see where"
            )
        last = await self.js.get_msg(self.settings.stream, state.last_seq)
        if room_line(state.last_seq, last.data or b"") is not None:
            return
        first = last if state.last_seq == 1 else await self.js.get_msg(self.settings.stream, 1)
        opening = room_line(1, first.data or b"")
        if opening is None or opening.prev != GENESIS:
            raise RoomCorrupt(
                f"the stream {self.settings.stream!r} does not begin with a room's first line; "
                "this stream is not a bullpen room. Check [room] stream in society.toml, and run "
                "`bullpen audit` on it"
            )
        # A room whose last message came from past the hub: serve it as a running hub
        # would have, skipping that message, rather than refuse to start over it.
        log.error(
            "the stream's last message is not a room line: something other than a hub "
            "published to the stream. /read skips it; run `bullpen audit`",
            stream_seq=state.last_seq,
            why=why_not_a_line(state.last_seq, last.data or b""),
        )

    # -- following the stream ----------------------------------------------

    async def _start_follower(self, start: int) -> None:
        if start > 1:
            before = await self.js.get_msg(self.settings.stream, start - 1)
            self._view = Head(start - 1, line_hash(before.data or b""))
        else:
            self._view = Head(0, GENESIS)
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
        if seq <= self._view.seq:
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
        elif seq != self._view.seq + 1 or message.prev != self._view.hash:
            self.chain_breaks += 1
            log.error(
                "the stream does not chain here; run `bullpen audit`",
                stream_seq=seq,
                line_seq=message.seq,
                after=self._view.seq,
            )
        line = _Line(seq, raw, message)
        self._cache.append(line)
        if line.thread is not None and line.thread in self._threads:
            self._threads[line.thread].append(seq)
        self._view = Head(seq, line_hash(raw))
        self._last_view_change = time.monotonic()
        for waiting in [s for s in self._confirm if s <= seq]:
            for future in self._confirm.pop(waiting):
                if not future.done():
                    future.set_result(None)
        self._wake_readers()

    async def _until_view(self, seq: int, timeout: float) -> None:
        if self._view.seq >= seq:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._confirm.setdefault(seq, []).append(future)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise DurabilityError(
                f"this hub's view of the stream did not reach seq {seq} within {timeout:g} s "
                f"(it is at {self._view.seq}); the NATS servers may be unreachable"
            ) from None

    async def _watch_follower(self) -> None:
        """Restart the follower when it lags behind what JetStream acknowledged for too long.

        The ordered consumer resets itself after missed heartbeats; this is the
        safety net for a reset that failed while the cluster elected a leader.
        """
        while not self._closing:
            await asyncio.sleep(1.0)
            wanted = min(self._confirm, default=0)
            if not wanted or time.monotonic() - self._last_view_change < 3.0:
                continue
            log.warning("the stream follower is stuck; starting it again", at=self._view.seq)
            try:
                with contextlib.suppress(Exception):
                    await self._follower.unsubscribe()
                self._follower = await self._subscribe_from(self._view.seq + 1)
                self._last_view_change = time.monotonic()
            except Exception as exc:
                log.warning("restarting the stream follower failed; trying again", error=str(exc))

    async def _probe(self) -> None:
        """Ask the stream now and then whether it answers, so /health can say when it does not."""
        js = self.nc.jetstream(timeout=PROBE_TIMEOUT_S)
        while not self._closing:
            await asyncio.sleep(PROBE_EVERY_S)
            if not self.nc.is_connected:
                continue  # `unavailable` says so already
            try:
                await js.stream_info(self.settings.stream)
            except Exception as exc:
                trouble = nats_failure(exc, self.settings, "asking the stream for its state")
                if self._stream_trouble is None:
                    log.warning("the stream does not answer", error=trouble.message)
                self._stream_trouble = trouble.message
                continue
            if self._stream_trouble is not None:
                log.info("the stream answers again")
            self._stream_trouble = None

    # -- appending -----------------------------------------------------------

    async def append(self, draft: Draft) -> Stored:
        if self._fatal is not None:
            raise self._fatal
        if self._closing or self._kick is None:
            raise DurabilityError("the room is closing; post again once the hub is back")
        loop = asyncio.get_running_loop()
        ulid, ms = self._ids.next()
        pending = _Pending(
            draft,
            loop.create_future(),
            ulid,
            ms,
            time.monotonic() + self.settings.append_deadline_s,
        )
        self._queue.append(pending)
        self._kick.set()
        return await pending.future

    async def _writer(self) -> None:
        assert self._kick is not None
        tip = self._view
        while self._fatal is None:
            await self._kick.wait()
            self._kick.clear()
            if not self._queue:
                if self._closing:
                    return
                continue
            batch = self._queue[: self.settings.max_batch]
            self._queue = self._queue[len(batch) :]
            if self._queue:
                self._kick.set()
            try:
                tip = await self._store(batch, tip)
            except asyncio.CancelledError:
                for pending in batch + self._queue:
                    if not pending.future.done():
                        pending.future.set_exception(
                            DurabilityError(
                                "the hub stopped before the NATS servers confirmed the post; it "
                                "may or may not have been stored: read the room once a hub is "
                                "back before posting again"
                            )
                        )
                raise
            except Exception as exc:  # some of the batch may be published, or buffered to be
                log.error("appending to the stream failed; stopping", exc_info=exc)
                self._fail_stop(
                    f"appending to the stream failed unexpectedly ({type(exc).__name__}: {exc})",
                    batch,
                )

    def _fail_stop(self, why: str, batch: list[_Pending]) -> None:
        """Stop for good: a post may be stored or not, and nothing held back may land later.

        Drops what the NATS client still holds to send, answers every waiting
        poster, and tells the hub (on_fatal), which stops serving and exits 70.
        """
        if self._fatal is not None:
            return
        self._fatal = DurabilityError(
            f"{why}; it may or may not have been stored. The hub stopped accepting posts and "
            "exits without sending anything it still held, so nothing lands later: once a hub "
            "is back, read the room before posting again"
        )
        dropped = drop_unsent(self._nc) if self._nc is not None else 0
        log.error("a post was not confirmed; stopping", why=why, unsent_bytes_dropped=dropped)
        for pending in batch + self._queue:
            if not pending.future.done():
                pending.future.set_exception(self._fatal)
        self._queue = []
        if self._kick is not None:
            self._kick.set()
        if self.on_fatal is not None:
            self.on_fatal(self._fatal)

    async def _store(self, batch: list[_Pending], tip: Head) -> Head:
        """Publish a batch until every line is stored (or out of time); return the new tip."""
        if self._view.seq > tip.seq:
            tip = self._view  # other hubs appended since our last batch
        todo = batch
        delay = 0.05
        while todo:
            late = [p for p in todo if time.monotonic() >= p.deadline]
            if late:
                self._fail_stop(
                    f"the NATS servers did not store the post within "
                    f"{self.settings.append_deadline_s:g} s",
                    todo,
                )
                return tip
            done, tip, trouble = await self._attempt(todo[: self.settings.pipeline], tip)
            for pending in done:
                self._confirm_later(pending)
            todo = [p for p in todo if p not in done]
            if not todo:
                break
            if trouble is None:
                continue  # that chunk is stored: the next one goes on top of it
            if trouble == "conflict":
                delay = 0.05
                log.info("another hub took the next seq; re-stamping", lines=len(todo))
            else:
                await asyncio.sleep(min(delay, _left(todo)))
                delay = min(delay * 2, 1.0)
            try:
                tip = await asyncio.wait_for(
                    stream_tip(self.js, self.settings), min(API_TIMEOUT_S, _left(todo))
                )
            except Exception as exc:
                log.warning(
                    "cannot read the stream's last line yet", error=str(exc) or type(exc).__name__
                )
        return tip

    async def _attempt(
        self, todo: list[_Pending], tip: Head
    ) -> tuple[list[_Pending], Head, str | None]:
        """Stamp the lines on `tip` and publish them in one go; return what was stored."""
        assert self._publisher is not None
        seq, prev = tip.seq, tip.hash
        futures = []
        before: str | None = None
        for pending in todo:
            seq += 1
            pending.seq = seq
            pending.raw = build_line(seq, pending.ulid, pending.ms, pending.draft, prev)
            prev = line_hash(pending.raw)
            headers = {"Nats-Msg-Id": pending.ulid, "Nats-Expected-Last-Sequence": str(seq - 1)}
            if before is not None:
                headers["Nats-Expected-Last-Msg-Id"] = before
            before = pending.ulid
            post = pending.draft.post
            futures.append(
                await self._publisher.publish(
                    self.settings.subject(post.to, post.type), pending.raw, headers
                )
            )
        # asyncio.wait, not wait_for: a timeout must leave the answers that did come.
        _, late = await asyncio.wait(
            futures, timeout=min(self.settings.publish_timeout_s, _left(todo))
        )
        answers: list[Any] = [f.result() if f.done() else None for f in futures]
        if late:
            self._publisher.forget(list(late))
            for future in late:
                future.cancel()
        done: list[_Pending] = []
        trouble: str | None = None
        for pending, answer in zip(todo, answers, strict=True):
            if answer is None:
                trouble = trouble or "timeout"
                break
            error = answer.get("error")
            if error:
                code = error.get("err_code")
                trouble = (
                    "conflict" if code in (WRONG_LAST_SEQUENCE, WRONG_LAST_MSG_ID) else "error"
                )
                if trouble == "error":
                    log.warning("the stream refused a line for now", error=error)
                break
            pending.stored_at = int(answer["seq"])
            pending.duplicate = bool(answer.get("duplicate"))
            if not pending.duplicate:
                tip = Head(pending.seq, line_hash(pending.raw))
            done.append(pending)
        # A later line acknowledged means every line before it is stored too
        # (each one's condition names the one before it), even if an answer was lost.
        if trouble == "timeout":
            acked = [
                i
                for i, a in enumerate(answers)
                if a and not a.get("error") and not a.get("duplicate")
            ]
            if acked and acked[-1] >= len(done):
                for pending in todo[len(done) : acked[-1] + 1]:
                    if pending not in done:
                        pending.stored_at = pending.seq
                        done.append(pending)
                last = todo[acked[-1]]
                tip = Head(last.seq, line_hash(last.raw))
        return done, tip, trouble

    def _confirm_later(self, pending: _Pending) -> None:
        """Answer the poster once this hub's view holds the line (read-your-writes)."""
        seq = pending.stored_at
        if self._view.seq >= seq:
            self._resolve(pending)
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._confirm.setdefault(seq, []).append(future)
        future.add_done_callback(lambda _: self._resolve(pending))
        # The line is stored: if this hub's view lags (its follower is being
        # restarted), answer from what was published rather than keep the poster waiting.
        loop.call_later(CONFIRM_WAIT_S, self._resolve, pending)

    def _resolve(self, pending: _Pending) -> None:
        if pending.future.done():
            return
        line = self._cached(pending.stored_at)
        if line is not None:
            pending.future.set_result(line.stored())
        elif not pending.duplicate:
            post = pending.draft.post
            pending.future.set_result(
                Stored(
                    pending.stored_at,
                    pending.raw,
                    post.from_,
                    post.to,
                    post.thread,
                    pending.draft.verified,
                )
            )
        else:
            task = asyncio.ensure_future(self._fetch_stored(pending))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _fetch_stored(self, pending: _Pending) -> None:
        """A line an earlier attempt stored, whose bytes only the stream still has."""
        try:
            raw = await self._line_for(pending.stored_at)
            obj = json.loads(raw)
            stored = Stored(
                pending.stored_at,
                raw,
                obj["from"],
                obj["to"],
                obj.get("thread"),
                obj.get("verified") is True,
            )
        except Exception as exc:
            if not pending.future.done():
                pending.future.set_exception(
                    DurabilityError(
                        f"the post was stored at seq {pending.stored_at}, but reading it back failed ({exc})"
                    )
                )
            return
        if not pending.future.done():
            pending.future.set_result(stored)

    def _cached(self, seq: int) -> _Line | None:
        if self._cache and self._cache[0].seq <= seq <= self._cache[-1].seq:
            return self._cache[seq - self._cache[0].seq]
        return None

    # -- reading ---------------------------------------------------------------

    async def read(self, after: int, limit: int, flt: Filter) -> ReadResult:
        head = self._view.seq
        if after >= head or limit <= 0:
            return ReadResult([], head)
        if flt.thread is not None:
            return await self._read_thread(after, limit, flt, head)
        if self._cache and after + 1 >= self._cache[0].seq:
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
            raw = await self._line_for(seq)
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
        if not 1 <= seq <= self._view.seq:
            return None
        return await self._line_for(seq)

    async def _line_for(self, seq: int) -> bytes:
        line = self._cached(seq)
        if line is not None:
            return line.raw
        msg = await self.js.get_msg(self.settings.stream, seq)
        return msg.data or b""

    async def close(self) -> None:
        self._closing = True
        if self._kick is not None:
            self._kick.set()
        if self._writer_task is not None:
            try:
                await asyncio.wait_for(self._writer_task, self.settings.append_deadline_s + 5)
            except (TimeoutError, asyncio.CancelledError):
                self._writer_task.cancel()
                await asyncio.gather(self._writer_task, return_exceptions=True)
            self._writer_task = None
        for task in (getattr(self, "_watchdog", None), getattr(self, "_prober", None)):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._nc is not None:
            if self._fatal is not None or not self._nc.is_connected:
                # Whatever is still buffered was never confirmed to a poster: never send it.
                drop_unsent(self._nc)
            else:
                with contextlib.suppress(Exception):
                    await self._nc.drain()
            with contextlib.suppress(Exception):
                await self._nc.close()
            self._nc = None


__all__ = ["JetStreamLog"]

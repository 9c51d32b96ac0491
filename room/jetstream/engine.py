"""The room on NATS JetStream: the same RoomLog, backed by a replicated stream.

When a society outgrows one hub and one disk, the log is an existing
distributed engine, not a home-made cluster. One stream holds the room, one
message per line, and the stream sequence *is* the line's `seq`:

- Subjects: `<prefix>.to.<nick>.<type>`, so a lurker's durable consumer can
  take only what is addressed to it (room/jetstream/follow.py).
- Several hubs on several hosts may append (room/jetstream/append.py).
  Each publishes with `Nats-Expected-Last-Sequence` (the line's seq - 1),
  one line in flight at a time, so a line lands only at the seq it was
  stamped with, right after the line its `prev` names — the chain stays
  unbroken. On a conflict the hub reads the stream's real last line and
  stamps the line again on top of it. (With `pipeline` > 1 the 2nd… line
  of a batch also carries `Nats-Expected-Last-Msg-Id`; see
  StreamSettings.pipeline for why that is not the default.)
- `Nats-Msg-Id` is the line's id and stays the same across every retry and
  re-stamp, so a post whose acknowledgement was lost is stored once.
- Every hub follows the whole stream with an ordered consumer (its view,
  room/jetstream/view.py), which keeps its head, a cache of recent lines
  and a thread index current, and wakes long-polling readers whichever hub
  appended. A post is answered only after JetStream acknowledged it *and*
  this hub's view holds it, so a client that reads right after posting
  sees its line.

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

This module opens the room (connect, check the stream, catch up), answers
/health, and composes the view and the append path into the hub's RoomLog.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import nats.errors
import structlog
from nats.aio.client import Client as NATS
from nats.js import api
from nats.js.client import JetStreamContext

from room.chain import GENESIS
from room.errors import DurabilityError, RoomCorrupt
from room.jetstream.append import Appender
from room.jetstream.stream import (
    API_TIMEOUT_S,
    Publisher,
    StreamSettings,
    connect,
    drop_unsent,
    ensure_stream,
    nats_failure,
    room_line,
    sync_warning,
    why_not_a_line,
)
from room.jetstream.view import StreamView
from room.log import Draft, Filter, Head, OpenReport, ReadResult, RoomLog, Stored

log = structlog.get_logger("room.jetstream.engine")

# The hub's first connect waits longer than a command's: a hub that gives up sooner is
# restarted by systemd (RestartSec=2) often enough to hit the unit's start limit (5 starts
# in 120 s) and then stays down after NATS is back; 30 s keeps it under that limit.
HUB_CONNECT_WAIT_S = 30.0
# How often the hub asks the stream whether it answers, for /health.
PROBE_EVERY_S = 2.0
PROBE_TIMEOUT_S = 5.0


class JetStreamLog(RoomLog):
    """The room as a JetStream stream; any number of hubs may hold one of these on it."""

    def __init__(self, settings: StreamSettings, *, name: str = "bullpen-hub") -> None:
        self.settings = settings
        self._name = name
        self._nc: NATS | None = None
        self._js: JetStreamContext | None = None
        self._view = StreamView(settings, self._wake_readers)
        self._appender: Appender | None = None
        self._closing = False
        self.nonces: Any = None  # a trust.streamnonces.StreamNonces, bound at open()
        self._stream_trouble: str | None = None  # the last probe's failure, None when it answered
        self._watchdog: asyncio.Task[None] | None = None
        self._prober: asyncio.Task[None] | None = None

    @property
    def head(self) -> Head:
        return self._view.head

    @property
    def on_stored(self) -> Callable[[list[Stored]], None] | None:
        return self._view.on_stored

    @on_stored.setter
    def on_stored(self, hook: Callable[[list[Stored]], None] | None) -> None:
        self._view.on_stored = hook

    @property
    def chain_breaks(self) -> int:
        """How many stream messages this hub saw that were not the next room line."""
        return self._view.chain_breaks

    @property
    def failed(self) -> DurabilityError | None:
        """Set once a post could not be confirmed: the hub stops acknowledging and exits."""
        return self._appender.failed if self._appender is not None else None

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
            publisher = Publisher(self._nc)
            await publisher.start()
            self._appender = Appender(
                self.settings, self._view, self._nc, self._js, publisher, self._stopped
            )
            last = info.state.last_seq
            await self._view.start(self._js, max(1, last - self.settings.cache_lines + 1))
            await self._view.until(last, 30.0)
        except (nats.errors.Error, TimeoutError) as exc:
            await self._nc.close()
            raise nats_failure(exc, self.settings, "opening the room's stream") from None
        except BaseException:
            await self._nc.close()
            raise
        self._appender.start()
        self._watchdog = asyncio.create_task(
            self._view.watch(lambda: self._closing), name="stream-watchdog"
        )
        self._prober = asyncio.create_task(self._probe(), name="stream-probe")
        return OpenReport(self._view.head, notes)

    def _stopped(self, error: DurabilityError) -> None:
        """The append path failed stop: tell the hub, which stops serving and exits 70."""
        if self.on_fatal is not None:
            self.on_fatal(error)

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

    async def append(self, draft: Draft) -> Stored:
        if self._appender is None:
            raise DurabilityError("the room is closing; post again once the hub is back")
        return await self._appender.append(draft)

    async def read(self, after: int, limit: int, flt: Filter) -> ReadResult:
        return await self._view.read(after, limit, flt)

    async def line_at(self, seq: int) -> bytes | None:
        return await self._view.line_at(seq)

    async def close(self) -> None:
        self._closing = True
        if self._appender is not None:
            await self._appender.close()
        for task in (self._watchdog, self._prober):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._nc is not None:
            if self.failed is not None or not self._nc.is_connected:
                # Whatever is still buffered was never confirmed to a poster: never send it.
                drop_unsent(self._nc)
            else:
                with contextlib.suppress(Exception):
                    await self._nc.drain()
            with contextlib.suppress(Exception):
                await self._nc.close()
            self._nc = None


__all__ = ["HUB_CONNECT_WAIT_S", "JetStreamLog"]

"""Following the room on JetStream: a lurker's durable consumer, filtered to its own subject.

The third follower, beside FileFollower and HubFollower (room/tail.py). A
lurker reads through a durable pull consumer named `lurker-<nick>` on
`<prefix>.to.<nick>.>`, so it receives only lines addressed to it (the wake
rules still run in full on the client). The consumer is the cursor that
survives anything: a restarted lurker, on any host, resumes from its ack
floor.

A message is acknowledged (ack-all) only once the lurker's progress (its
safe position: nothing at or before it is still being handled) has passed
it, so the consumer's ack floor is exactly such a position. A restarted
follower starts the consumer again at that floor: whatever the last run was
given but had not finished comes again at once, and the lurker's dedupe —
it collects its own replies after the point it resumes from — keeps a
redelivered message from being answered twice. Idle, a follower holds one long-poll
fetch open on the server: no polling loop.

A message that is not a room line at its seq (published past the hub) is
logged and skipped; it counts as done, so it is acknowledged with the lines
around it and never stays pending on the consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js import api
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

from room.errors import LogError
from room.jetstream.stream import StreamSettings, connect, room_line, why_not_a_line
from room.message import Message
from room.tail import Position

log = structlog.get_logger("room.jetstream.follow")


def consumer_name(nick: str) -> str:
    return f"lurker-{nick}"


class StreamFollower:
    """Yield (Message, Position) for every line addressed to `nick`, from its durable consumer."""

    def __init__(
        self,
        settings: StreamSettings,
        nick: str,
        start: Position,
        *,
        progress: Callable[[], int],
        on_resume: Callable[[int], Awaitable[None]] | None = None,
        ack_wait_s: float = 300.0,
        fetch_wait_s: float = 25.0,
        batch: int = 64,
    ) -> None:
        self.settings = settings
        self.nick = nick
        self.name = consumer_name(nick)
        self._start = start
        self._progress = progress
        self._on_resume = on_resume
        self._ack_wait = ack_wait_s
        self._fetch_wait = fetch_wait_s
        self._batch = batch
        self._yielded = 0  # the highest seq handed to the lurker in this run
        self._unacked: list[tuple[int, Msg]] = []
        self._skipped: set[int] = set()  # seqs not handed to the lurker: done once reached
        self._nc: NATS | None = None

    async def _bind(self) -> tuple[NATS, JetStreamContext.PullSubscription, int]:
        """Connect and (re)create the consumer at its ack floor; return the seq to resume after.

        Lines the previous run had been given but not acknowledged would only
        come back after `ack_wait`; starting the consumer again at its floor
        delivers them now, and the floor is the cursor that survives anything.
        """
        nc = await connect(self.settings, f"bullpen-lurker-{self.nick}")
        try:
            js = nc.jetstream()
            created = False
            try:
                info = await js.consumer_info(self.settings.stream, self.name)
                floor = info.ack_floor.stream_seq if info.ack_floor else 0
                resume = max(floor, (info.config.opt_start_seq or 1) - 1)
                await js.delete_consumer(self.settings.stream, self.name)
            except NotFoundError:
                resume, created = self._start.seq, True
            config = api.ConsumerConfig(
                durable_name=self.name,
                description=f"bullpen lurker {self.nick}: what is addressed to it",
                filter_subject=self.settings.addressed_to(self.nick),
                ack_policy=api.AckPolicy.ALL,
                ack_wait=self._ack_wait,
                max_ack_pending=1000,
                max_deliver=-1,
                deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
                opt_start_seq=resume + 1,
            )
            await js.add_consumer(self.settings.stream, config)
            psub = await js.pull_subscribe_bind(durable=self.name, stream=self.settings.stream)
        except BaseException:
            await nc.close()
            raise
        log.info(
            "following the stream",
            stream=self.settings.stream,
            consumer=self.name,
            created=created,
            resume_after=resume,
        )
        return nc, psub, resume

    async def follow(self) -> AsyncIterator[tuple[Message, Position]]:
        delay = 0.2
        while True:
            try:
                self._nc, psub, resume = await self._bind()
                break
            except LogError as exc:
                log.warning("nats unreachable; retrying", error=exc.message, retry_in_s=delay)
            except Exception as exc:
                log.warning("cannot bind the consumer; retrying", error=str(exc), retry_in_s=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)
        acker = asyncio.create_task(self._ack_loop())
        try:
            if self._on_resume is not None and resume < self._start.seq:
                # The consumer is behind the lurker's cursor: it will deliver lines the
                # lurker may have answered already. Let it collect its replies from there.
                await self._on_resume(resume)
            self._yielded = resume
            while True:
                try:
                    msgs = await psub.fetch(self._batch, timeout=self._fetch_wait)
                except (TimeoutError, NatsTimeout):
                    if await self._deliveries_lost(psub):
                        psub = await self._rebind()
                    continue
                except Exception as exc:
                    log.warning("fetching from the stream failed; retrying", error=str(exc))
                    await asyncio.sleep(1.0)
                    continue
                for msg in msgs:
                    seq = msg.metadata.sequence.stream
                    self._unacked.append((seq, msg))
                    if seq <= self._yielded:
                        continue  # redelivered while still being handled: never twice
                    message = room_line(seq, msg.data)
                    if message is None:
                        log.error(
                            "skipping a stream message that is not a room line; run `bullpen audit`",
                            seq=seq,
                            why=why_not_a_line(seq, msg.data),
                        )
                        self._skipped.add(seq)
                        self._yielded = seq
                        continue
                    self._yielded = seq
                    yield message, Position(seq)
                await self._ack()
        finally:
            acker.cancel()
            await asyncio.gather(acker, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self._ack()
            if self._nc is not None:
                with contextlib.suppress(Exception):
                    await self._nc.close()

    async def _deliveries_lost(self, psub: JetStreamContext.PullSubscription) -> bool:
        """After an idle fetch: does the consumer hold lines this follower never received?

        When a partition moves the consumer's leader, lines the old leader handed to a pull
        request that never reached us count as delivered: the new leader waits `ack_wait`
        (minutes) before it sends them again, and every fetch meanwhile comes back empty
        with the lurker's ask among them. The consumer says so: more lines delivered and
        not acknowledged than this follower holds.
        """
        try:
            info = await psub.consumer_info()
        except Exception as exc:  # unreachable now: the next fetch retries and says so
            log.debug("cannot ask the consumer for its state", error=str(exc))
            return False
        lost = (info.num_ack_pending or 0) > len(self._unacked)
        if lost:
            log.warning(
                "the consumer holds lines this lurker never received (its leader moved); "
                "binding again at its ack floor",
                consumer=self.name,
                ack_pending=info.num_ack_pending,
                held=len(self._unacked),
            )
        return lost

    async def _rebind(self) -> JetStreamContext.PullSubscription:
        """The consumer again at its ack floor: lines it counted as delivered come now (what
        was handed to the lurker already is skipped by seq, never answered twice)."""
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.close()
        delay = 0.2
        while True:
            try:
                self._nc, psub, _ = await self._bind()
                return psub
            except Exception as exc:
                log.warning("cannot bind the consumer; retrying", error=str(exc), retry_in_s=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def _ack(self) -> None:
        """Acknowledge (ack-all) the last delivered line the lurker is done with.

        Done: at or before the lurker's progress, or skipped with nothing
        before it still being handled.
        """
        if not self._unacked:
            return
        safe = self._progress()
        pending = sorted(self._unacked, key=lambda item: item[0])
        count = 0
        for seq, _ in pending:
            if seq > safe and seq not in self._skipped:
                break
            count += 1
        if not count:
            return
        last_seq, last = pending[count - 1]
        await last.ack()  # ack-all: every line up to it; kept for the next try if this fails
        self._unacked = [item for item in self._unacked if item[0] > last_seq]
        self._skipped = {seq for seq in self._skipped if seq > last_seq}

    async def _ack_loop(self) -> None:
        """While lines are being handled, acknowledge each soon after its handler finishes."""
        while True:
            await asyncio.sleep(0.25 if self._unacked else 1.0)
            try:
                await self._ack()
            except Exception as exc:
                log.warning("acknowledging failed; it is retried", error=str(exc))

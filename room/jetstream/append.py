"""The append path of the room on JetStream: storing each post once, at its seq, or stopping.

It exists apart from the hub's view (room/jetstream/view.py) because it is
the one place that writes: a writer task takes posts in batches, stamps each
line on the stream's tip and publishes it with `Nats-Expected-Last-Sequence`
(and, for the 2nd… line of a pipelined batch, `Nats-Expected-Last-Msg-Id`),
stamps it again on top of the real last line when another hub took that seq,
answers the poster once the view holds the line, and fails stop when the
servers did not confirm a post in time (room/jetstream/engine.py says why).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from nats.aio.client import Client as NATS
from nats.js.client import JetStreamContext

from room.chain import line_hash
from room.errors import DurabilityError
from room.ids import IdClock
from room.jetstream.stream import (
    API_TIMEOUT_S,
    WRONG_LAST_MSG_ID,
    WRONG_LAST_SEQUENCE,
    Publisher,
    StreamSettings,
    drop_unsent,
    stream_tip,
)
from room.jetstream.view import StreamView
from room.log import Draft, Head, Stored, build_line

log = structlog.get_logger("room.jetstream.append")

# How long a stored post waits for this hub's view to show it before it is answered anyway.
CONFIRM_WAIT_S = 5.0


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


class Appender:
    """One hub's writer to the stream; `on_fatal` is told once when it fails stop."""

    def __init__(
        self,
        settings: StreamSettings,
        view: StreamView,
        nc: NATS,
        js: JetStreamContext,
        publisher: Publisher,
        on_fatal: Callable[[DurabilityError], None],
    ) -> None:
        self.settings = settings
        self._view = view
        self._nc = nc
        self._js = js
        self._publisher = publisher
        self._on_fatal = on_fatal
        self._ids = IdClock()
        self._queue: list[_Pending] = []
        self._kick = asyncio.Event()
        self._writer_task: asyncio.Task[None] | None = None
        self._closing = False
        self._background: set[asyncio.Future[None]] = set()
        self._fatal: DurabilityError | None = None

    @property
    def failed(self) -> DurabilityError | None:
        """Set once a post could not be confirmed: the hub stops acknowledging and exits."""
        return self._fatal

    def start(self) -> None:
        """Start the writer task; posts queued before it wait for it."""
        self._writer_task = asyncio.create_task(self._writer(), name="stream-writer")

    async def append(self, draft: Draft) -> Stored:
        if self._fatal is not None:
            raise self._fatal
        if self._closing:
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
        tip = self._view.head
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
        dropped = drop_unsent(self._nc)
        log.error("a post was not confirmed; stopping", why=why, unsent_bytes_dropped=dropped)
        for pending in batch + self._queue:
            if not pending.future.done():
                pending.future.set_exception(self._fatal)
        self._queue = []
        self._kick.set()
        self._on_fatal(self._fatal)

    async def _store(self, batch: list[_Pending], tip: Head) -> Head:
        """Publish a batch until every line is stored (or out of time); return the new tip."""
        if self._view.head.seq > tip.seq:
            tip = self._view.head  # other hubs appended since our last batch
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
                    stream_tip(self._js, self.settings), min(API_TIMEOUT_S, _left(todo))
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
        if self._view.head.seq >= seq:
            self._resolve(pending)
            return
        loop = asyncio.get_running_loop()
        future = self._view.holds(seq)
        future.add_done_callback(lambda _: self._resolve(pending))
        # The line is stored: if this hub's view lags (its follower is being
        # restarted), answer from what was published rather than keep the poster waiting.
        loop.call_later(CONFIRM_WAIT_S, self._resolve, pending)

    def _resolve(self, pending: _Pending) -> None:
        if pending.future.done():
            return
        line = self._view.cached(pending.stored_at)
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
            raw = await self._view.line_for(pending.stored_at)
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

    async def close(self) -> None:
        """Take no more posts; let the writer finish what it holds, up to the append deadline."""
        self._closing = True
        self._kick.set()
        if self._writer_task is not None:
            try:
                await asyncio.wait_for(self._writer_task, self.settings.append_deadline_s + 5)
            except (TimeoutError, asyncio.CancelledError):
                self._writer_task.cancel()
                await asyncio.gather(self._writer_task, return_exceptions=True)
            self._writer_task = None


__all__ = ["CONFIRM_WAIT_S", "Appender"]

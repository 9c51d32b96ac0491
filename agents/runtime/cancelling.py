"""A lurker's running steps and their cancellation: each step's run kept by its ask's id, so
that the foreman's cancel of the run stops it, and a step that runs for more than a moment
watches its thread for that cancel itself.

Split from agents/runtime/lurker.py (the tail loop, which mixes this in); docs/operating.md
says what a cancel does.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from agents.runtime.cancel import is_cancel
from agents.runtime.outcome import Failure, Handler, Outcome
from agents.runtime.step import StepContext
from room.errors import HubUnavailable
from room.message import Message

if TYPE_CHECKING:
    from agents.config import NickConfig
    from room.client import RoomClient

__all__ = ["CANCEL_WATCH_AFTER_S", "MAX_BACKOFF_S", "CancellableSteps"]

CANCEL_WATCH_AFTER_S = 1.0  # a step still running this long starts watching for a cancel
MAX_BACKOFF_S = 10.0  # the longest wait between two tries of an unreachable hub


class CancellableSteps:
    """The part of a Lurker that runs a step and stops it when its run is cancelled."""

    nick: str
    config: NickConfig
    handler: Handler
    client: RoomClient
    trusted: frozenset[str]
    log: Any
    _running: dict[str, asyncio.Future[Outcome]]  # ask id -> its handler's run
    _cancelled: set[str]  # ask ids whose run was cancelled mid-step

    def _cancel_step(self, ask_id: str, seq: int) -> None:
        work = self._running.get(ask_id)
        if work is None or work.done():
            self.log.info("cancel for a step not running here", seq=seq, ask=ask_id)
            return
        self.log.info("cancelling a step: its run was cancelled", seq=seq, ask=ask_id)
        self._cancelled.add(ask_id)
        work.cancel()

    async def _watch_for_cancel(self, message: Message) -> None:
        """While a step runs, watch its thread for the foreman's cancel of it.

        The follow loop cannot see the notice while every slot is busy (it waits for one
        before reading on), so a step that runs for more than a moment looks for itself."""
        await asyncio.sleep(CANCEL_WATCH_AFTER_S)
        after, delay = message.seq, 0.2
        while True:
            try:
                lines, after = await self.client.read(
                    after, 100, thread=message.thread, to=f"@{self.nick}", wait=25.0
                )
            except HubUnavailable:
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)
                continue
            for line in lines:
                notice = Message.model_validate(line)
                if (
                    notice.verified
                    and notice.from_ in self.trusted
                    and is_cancel(notice)
                    and notice.in_reply_to == message.id
                ):
                    self._cancel_step(message.id, notice.seq)
                    return

    async def _run_step(self, message: Message, ctx: StepContext) -> Outcome:
        """The handler's outcome, or a cancelled flag when the run is cancelled meanwhile."""
        work = asyncio.ensure_future(self.handler.run(message, ctx, self.config.timeout_s))
        self._running[message.id] = work
        watcher = (
            asyncio.create_task(self._watch_for_cancel(message))
            if message.type == "ask" and message.thread
            else None
        )
        try:
            return await work
        except asyncio.CancelledError:
            if message.id not in self._cancelled or not work.cancelled():
                raise  # the lurker is stopping: the ask stays before the cursor
            return Failure("the run was cancelled; the step was stopped", {"cancelled": True})
        finally:
            self._running.pop(message.id, None)
            self._cancelled.discard(message.id)
            if watcher is not None:
                watcher.cancel()

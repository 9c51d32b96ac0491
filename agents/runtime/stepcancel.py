"""A lurker's steps, stoppable when their run is cancelled (agents/runtime/cancel.py).

The foreman tells a step agent that a run was cancelled with a notice in reply to the
step's ask. The lurker's follow loop sees that notice only when a slot is free, and a slot
is exactly what a long step holds; so a step that runs for more than a moment also watches
its own thread for the notice. Either way the step's work is cancelled (a forked step's
process, a fenced run's process group are killed as on a timeout) and the step answers with
a cancelled flag, never silence.

Only the nick that asked the step may stop it: for a run's step that is the foreman, which
sends the notice only on the run's operator's cancel. Any other trusted nick could stop
every step of every run before (issue 33); its notice is now ignored, and the lurker says
so in the room, in reply to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from agents.runtime.cancel import is_cancel
from agents.runtime.outcome import Failure, Outcome, OutPost
from room.errors import HubUnavailable
from room.message import Message

if TYPE_CHECKING:
    from room.client import RoomClient

WATCH_AFTER_S = 1.0  # a step still running this long starts watching for a cancel
MAX_BACKOFF_S = 10.0


class CancellableSteps:
    """The steps one lurker is running, by the id of the ask each answers."""

    def __init__(self, nick: str, client: RoomClient, trusted: frozenset[str], log: Any) -> None:
        self.nick = nick
        self.client = client
        self.trusted = trusted
        self.log = log
        self._running: dict[str, tuple[Message, asyncio.Future[Outcome]]] = {}
        self._cancelled: set[str] = set()

    def cancel(self, notice: Message) -> OutPost | None:
        """Stop the step the notice answers, if it runs here and its asker sent the notice;
        when another nick sent it, the line that says it was ignored (None otherwise)."""
        ask_id = str(notice.in_reply_to or "")
        running = self._running.get(ask_id)
        if running is None or running[1].done():
            self.log.info("cancel for a step not running here", seq=notice.seq, ask=ask_id)
            return None
        ask, work = running
        if notice.from_ != ask.from_:
            self.log.warning(
                "cancel ignored: only the nick that asked may stop a step",
                seq=notice.seq,
                ask=ask_id,
                sender=notice.from_,
                asker=ask.from_,
            )
            return ignored(self.nick, notice, ask)
        self.log.info("cancelling a step: its run was cancelled", seq=notice.seq, ask=ask_id)
        self._cancelled.add(ask_id)
        work.cancel()
        return None

    async def run(self, message: Message, step: Awaitable[Outcome]) -> Outcome:
        """`step`'s outcome, or a cancelled flag when the run is cancelled meanwhile."""
        work = asyncio.ensure_future(step)
        self._running[message.id] = (message, work)
        watcher = (
            asyncio.create_task(self._watch(message))
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

    async def _watch(self, message: Message) -> None:
        """Long-poll the step's thread for the foreman's cancel of its ask."""
        await asyncio.sleep(WATCH_AFTER_S)
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
                    and notice.from_ == message.from_  # the asker; others: the follow loop
                    and is_cancel(notice)
                    and notice.in_reply_to == message.id
                ):
                    self.cancel(notice)
                    return


def ignored(nick: str, notice: Message, ask: Message) -> OutPost:
    """The line a step's lurker posts in reply to a cancel it may not act on."""
    return OutPost(
        f"@{notice.from_}",
        f"[{nick} IGNORED A CANCEL — only @{ask.from_}, which asked this step, may stop it; "
        "the step goes on]",
        "reply",
        {"cancel_ignored": True, "ask": ask.id, "asker": ask.from_, "nick": nick},
        notice.id,
        notice.thread,
    )

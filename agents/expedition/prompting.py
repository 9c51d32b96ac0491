"""The Dig Report's prompt at the terminal, which a run ending elsewhere also answers.

While `bullpen expedition` waits for the operator to type `confirm …`, a `bullpen cancel`
from another shell (or the web view) may end the run. The prompt then must not wait on:
what the operator types is read on the event loop (agents/runtime/terminal.py) while the
run's thread is followed, and whichever comes first wins. A final report first ends the
prompt with RunEnded, so nothing typed afterwards is posted into an ended run.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, TextIO

from agents.runtime.terminal import read_line
from room.message import Message

if TYPE_CHECKING:
    from room.client import RoomClient

__all__ = ["ANSWER_PROMPT", "RunEnded", "typed_unless_ended"]

ANSWER_PROMPT = "confirm / confirm, drop row_N ... / redirect TEXT (empty: leave it waiting): "
POLL_S = 25.0


class RunEnded(Exception):
    """The run ended (its final report is in `report`) while the command waited at a prompt."""

    def __init__(self, report: Message) -> None:
        super().__init__(report.body)
        self.report = report


async def typed_unless_ended(
    client: RoomClient, thread: str, foreman: str, out: TextIO, after: int
) -> str:
    """What the operator types at the prompt ("" at end of input), or RunEnded when the
    run's final report (after seq `after`) arrives first."""
    typed = asyncio.ensure_future(read_line(ANSWER_PROMPT, out))
    ended = asyncio.ensure_future(_final_after(client, thread, foreman, after))
    try:
        await asyncio.wait([typed, ended], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (typed, ended):
            task.cancel()
        await asyncio.gather(typed, ended, return_exceptions=True)
    if typed.done() and not typed.cancelled():
        if isinstance(typed.exception(), EOFError):
            return ""
        return typed.result()
    if ended.done() and not ended.cancelled() and ended.exception() is None:
        raise RunEnded(ended.result())
    return typed.result()  # re-raises what stopped it


async def _final_after(client: RoomClient, thread: str, foreman: str, after: int) -> Message:
    """The run's final report, the first after seq `after`."""
    async for line in client.follow(after, thread=thread, wait=POLL_S):
        message = Message.model_validate(line)
        if message.verified and message.from_ == foreman and (message.data or {}).get("final"):
            return message
    raise RuntimeError("the room's follow ended")  # follow() never ends by itself

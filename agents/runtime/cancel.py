"""Cancelling a run: what the operator posts, what the foreman answers, what a step is told.

A cancel is a room line like any other, so it is audited like any other:

    operator -> @foreman   chat   {"cancel": true, "reason": "..."}            in the run's thread
    foreman  -> @operator  reply  [RUN CANCELLED — reason]  {"final": true, "cancelled": true}
    foreman  -> @step      chat   {"cancel": true, "ask": <id>}  in_reply_to the pending ask

Only the run's own operator (the poster of its starting ask), verified, can cancel it. The
foreman's final report ends the run: a late reply is answered with nothing, as after any
final report. A step agent still working on an ask of the run is told; its lurker stops the
handler (a grinder's fenced run is killed, its clone left as it is) and replies with a
cancelled flag instead of an answer, so no ask is left without a reply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from room.errors import UsageError
from room.message import Message, bare

if TYPE_CHECKING:
    from room.client import RoomClient

CANCEL = "cancel"
CANCELLED_KEY = "cancelled"  # the foreman's final report's key, and its data flag
EXIT_CANCELLED = 5  # what a command waiting on a cancelled run exits with


def cancel_data(reason: str) -> dict[str, Any]:
    return {CANCEL: True, "reason": reason}


def is_cancel(message: Message) -> bool:
    """A cancel notice: from the operator to the foreman, or from the foreman to a step."""
    return message.type == "chat" and bool((message.data or {}).get(CANCEL))


def reason_of(message: Message) -> str:
    reason = str((message.data or {}).get("reason") or "").strip()
    return " ".join(reason.split())[:300] or "no reason given"


def cancelled_body(reason: str) -> str:
    return f"[RUN CANCELLED — {reason}]"


def step_notice_data(ask_id: str, reason: str) -> dict[str, Any]:
    return {CANCEL: True, "ask": ask_id, "reason": reason}


def is_cancelled_report(data: dict[str, Any]) -> bool:
    return bool(data.get("final")) and bool(data.get(CANCELLED_KEY))


async def post_cancel(
    client: RoomClient, thread: str, reason: str, foreman: str = "foreman"
) -> dict[str, Any]:
    """Post the operator's cancel of `thread`, once it is checked to be a run still going.

    UsageError (nothing posted) for a thread with no run, or a run already ended."""
    from room.client import read_thread  # httpx: loaded by the commands that cancel

    messages = await read_thread(client, thread)
    starts = [m for m in messages if m.type == "ask" and bare(m.to) == foreman]
    if not starts or (starts[0].data or {}).get("ping"):
        raise UsageError(
            f"there is no run with the thread {thread} in the room: no ask to @{foreman} "
            f"carries it. Find a run's thread with `bullpen runs` (each command "
            "prints its thread when it starts)"
        )
    final = next(
        (
            m
            for m in messages
            if m.from_ == foreman and m.type == "reply" and (m.data or {}).get("final")
        ),
        None,
    )
    if final is not None:
        first = final.body.strip().splitlines()[0][:200] if final.body.strip() else ""
        raise UsageError(
            f"the run {thread} has already ended (seq {final.seq}: {first}); nothing to cancel"
        )
    return await client.say(
        f"@{foreman}", f"cancel: {reason}", type="chat", data=cancel_data(reason), thread=thread
    )

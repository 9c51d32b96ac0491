"""Asks a lurker answers itself, before any handler: a ping, and a pre-flight.

A ping (`{"ping": true}`) proves the lurker runs; its pong says where
(agents.runtime.ping.pong_identity). A pre-flight (`{"preflight": {...}}`) asks more
before a run is posted (`bullpen build`, agents/build/placement.py): on which host the
nick runs, whether the hub answers it, and what its step would need there: a Python
step may carry a check (`with_preflight`), a plain function of the request and the
step's context that looks, and changes nothing: a folder's view, a tool on the PATH.
The step itself never runs, so no model is asked and nothing is written.

Like every wake, a pre-flight is answered only when the wake rules hold (the asker is
trusted and verified); the asker counts only verified answers. A nick whose handler has
no check (a command, an MCP agent) answers with its identity and `checked: false`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agents.runtime.ping import pong_identity
from agents.runtime.step import Reply
from agents.runtime.wake import is_ping
from room.errors import BullpenError

if TYPE_CHECKING:
    from agents.runtime.outcome import Handler, Outcome
    from agents.runtime.step import StepContext
    from room.client import RoomClient
    from room.message import Message

KEY = "preflight"
CHECK_S = 20.0  # a check that takes longer is reported as a problem, never waited on

Check = Callable[[dict[str, Any], "StepContext"], dict[str, Any]]
StepT = TypeVar("StepT")


def is_preflight(message: Message) -> bool:
    data = message.data
    return (
        message.type == "ask"
        and isinstance(data, dict)
        and set(data) == {KEY}
        and isinstance(data[KEY], dict)
    )


def answers_itself(message: Message) -> bool:
    """A ping or a pre-flight: answered by the lurker, at once, whatever its step is doing."""
    return is_ping(message) or is_preflight(message)


def with_preflight(check: Check) -> Callable[[StepT], StepT]:
    """Give a step its pre-flight check: `check(request, ctx)` returns the step's view, with
    `problems`, a list of {"what", "fix"} (empty: the step could do its work here)."""

    def mark(step: StepT) -> StepT:
        step.preflight = check  # type: ignore[attr-defined]
        return step

    return mark


async def answered_itself(
    message: Message, ctx: StepContext, handler: Handler, client: RoomClient
) -> Outcome | None:
    """The lurker's own answer to a ping or a pre-flight; None for every other message."""
    identity = {"nick": ctx.nick, **pong_identity(ctx.home)}
    if is_ping(message):
        return Reply("pong", {"pong": True, **identity})
    if not is_preflight(message):
        return None
    request = dict((message.data or {})[KEY])
    data: dict[str, Any] = {KEY: True, **identity, "problems": []}
    started = time.monotonic()
    try:
        await client.health()
        data["hub_ms"] = round((time.monotonic() - started) * 1000, 1)
    except BullpenError as exc:  # it reads the room, yet cannot reach the hub's /health
        data["problems"].append(
            {"what": f"the hub does not answer it: {exc.message}",
             "fix": "check [hub] in society.toml on this host and that the hub runs"}
        )  # fmt: skip
    try:
        check = handler.preflight_check(ctx)
        if check is None:
            data["checked"] = False
            return Reply(f"pre-flight: {ctx.nick} on {identity['host']}: no check", data)
        view = await asyncio.wait_for(asyncio.to_thread(check, request, ctx), CHECK_S)
    except TimeoutError:
        view = {"problems": [{"what": f"its pre-flight check took over {CHECK_S:g} s",
                              "fix": "look at the lurker's log on this host"}]}  # fmt: skip
    except Exception as exc:  # a broken check is the step's problem: said, never silence
        reason = exc.message if isinstance(exc, BullpenError) else f"{type(exc).__name__}: {exc}"
        view = {"problems": [{"what": f"its pre-flight check failed: {reason}",
                              "fix": "look at the lurker's log on this host"}]}  # fmt: skip
    data["problems"] += list(view.pop("problems", []))
    data.update(view, checked=True)
    said = "ok" if not data["problems"] else f"{len(data['problems'])} problem(s)"
    return Reply(f"pre-flight: {ctx.nick} on {identity['host']}: {said}", data)

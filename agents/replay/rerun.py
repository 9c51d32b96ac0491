"""One step asked again: the same handler, the same ask, through the seat named.

The result puts the recorded answer and the replayed one side by side, each
with its gates (agents/replay/gates.py). Nothing is posted: the handler's
outcome is turned into the reply its lurker would have posted (a Failure
becomes `[NICK FAILED — reason]`, as agents/runtime/lurker.py writes it), and
screened for secrets like any post, so a secret never reaches the terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.replay import gates, sandbox
from agents.runtime.outcome import Failure, Outbox, screened
from agents.runtime.step import Reply
from room.errors import UsageError

if TYPE_CHECKING:
    from agents.home import Home
    from agents.replay.recorded import Recorded, Step
    from agents.seats.request import Judge


def failure_body(nick: str, reason: str) -> str:
    """The body a lurker posts for a failed step (agents/runtime/lurker.py)."""
    from agents.runtime.lurker import failure_body as lurker_body

    return lurker_body(nick, reason)


def check_seat(home: Home, seat: str | None) -> None:
    """Refuse a seat name no `[seats.*]` table (or role) defines, listing the known ones."""
    if seat is None:
        return
    from agents.seats import build_seats

    known = build_seats(home.society.seats)
    if seat not in known:
        raise UsageError(
            f"there is no seat named {seat!r}; the known seats are {', '.join(known.names())} "
            f"— add a [seats.{seat}] table to society.toml or use one of those"
        )


def as_answer(nick: str, outcome: Reply | Failure) -> dict[str, Any]:
    """The reply the lurker would post for this outcome: {"body", "data"}."""
    if isinstance(outcome, Failure):
        data = {"failed": True, "reason": outcome.reason, "nick": nick, **outcome.details}
        return {"body": failure_body(nick, outcome.reason), "data": data}
    return {"body": outcome.body, "data": dict(outcome.data or {})}


async def ask_again(home: Home, recorded: Recorded, step: Step, judge: Judge) -> dict[str, Any]:
    """The step's answer, asked again in the sandbox: {"body", "data"}."""
    handler = sandbox.load_handler(home, step.nick)
    config = sandbox.nick_config(home, step.nick)
    ctx = sandbox.context(home, recorded, step, judge)
    with sandbox.scratch_folder():
        outcome = await handler.run(step.ask, ctx, config.timeout_s)
    outcome = screened(outcome, home.screen, f"the replay of {step.key}")
    if isinstance(outcome, Outbox):  # a sequencer, not a step: refused before it got here
        raise UsageError(f"@{step.nick} answers with several posts; it is not a step to replay")
    return as_answer(step.nick, outcome)


def side_by_side(
    home: Home, recorded: Recorded, step: Step, replayed: dict[str, Any], seat: str | None
) -> dict[str, Any]:
    """The `--json` shape: the thread, the step, both answers, the seat, both gate results."""
    handler = sandbox.nick_config(home, step.nick).handler
    answer = step.answer
    before: dict[str, Any] = {
        "seq": answer.seq,
        "body": answer.body,
        "data": dict(answer.data or {}),
        "seat": step.seat,
    }
    after: dict[str, Any] = {**replayed, "seat": replayed["data"].get("seat")}
    return {
        "thread": recorded.thread,
        "step": step.key,
        "nick": step.nick,
        "ask_seq": step.ask.seq,
        "recorded": before,
        "replayed": after,
        "seat": seat or after["seat"],
        "gates": {
            "recorded": gates.check(handler, step.ask, before["data"]),
            "replayed": gates.check(handler, step.ask, after["data"]),
        },
    }


async def replay(
    home: Home, recorded: Recorded, key: str, seat: str | None, judge: Judge | None = None
) -> dict[str, Any]:
    """Replay step `key` through `seat` (None: the seat configured now); the side-by-side."""
    step = recorded.step(key)
    sandbox.nick_config(home, step.nick)  # refuse a step that writes files, before any call
    check_seat(home, seat)
    if judge is None:
        judge = sandbox.judge_through(sandbox.seat_services(home, step.nick), seat)
    replayed = await ask_again(home, recorded, step, judge)
    verify = getattr(judge, "check", None)  # the offline judge: fail loud on a missing recording
    if callable(verify):
        verify()
    return side_by_side(home, recorded, step, replayed, seat)

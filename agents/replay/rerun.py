"""One step asked again: the same handler, the same ask, through the seat named.

The result puts the recorded answer and the replayed one side by side, each
with its gates (agents/replay/gates.py). Nothing is posted: the handler's
outcome is turned into the reply its lurker would have posted (a Failure
becomes `[NICK FAILED — reason]`, as agents/runtime/lurker.py writes it), and
screened for secrets like any post, so a secret never reaches the terminal.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.replay import gates, sandbox
from agents.runtime.outcome import Failure, Outbox, screened
from agents.runtime.step import Reply
from room.errors import UsageError

if TYPE_CHECKING:
    from agents.home import Home
    from agents.replay.recorded import Recorded, Step
    from agents.seats.request import Judge
    from room.message import Message


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


async def _run(
    home: Home, recorded: Recorded, step: Step, judge: Judge, ask: Message
) -> dict[str, Any]:
    """The handler on `ask` with `home`'s files, as the reply its lurker would post."""
    handler = sandbox.load_handler(home, step.nick)
    config = sandbox.nick_config(home, step.nick)
    ctx = sandbox.context(home, recorded, step, judge)
    with sandbox.scratch_folder():
        outcome = await handler.run(ask, ctx, config.timeout_s)
    outcome = screened(outcome, home.screen, f"the replay of {step.key}")
    if isinstance(outcome, Outbox):  # a sequencer, not a step: refused before it got here
        raise UsageError(f"@{step.nick} answers with several posts; it is not a step to replay")
    return as_answer(step.nick, outcome)


async def in_private_copy(
    home: Home, recorded: Recorded, step: Step, judge: Judge
) -> dict[str, Any]:
    """A file-writing step run against a private copy of what its ask names (copy.py): its
    answer with the copy's paths named as the originals, and what it wrote there."""
    from agents.backpass.config import run_dir
    from agents.replay.copy import allowed_places, changes, named_paths, private_copy
    from agents.replay.shadow import ShadowHome

    data = dict(step.ask.data or {})
    own = run_dir(Path("/"), step.ask.thread or "").name
    with private_copy(allowed_places(home), own) as copy:
        copy.copy_all(Path(named) for named in dict.fromkeys(named_paths(data)))
        copy.repoint_git()
        shadow = ShadowHome(home, copy)
        ask = step.ask.model_copy(update={"data": copy.map_in(data)})
        before = copy.snapshot()
        answer = await _run(shadow, recorded, step, judge, ask)
        written = changes(before, copy.snapshot())
        posts = copy.map_out(shadow.posts)
        summary = copy.summary()
        answer = copy.map_out(answer)
    screened_posts = [screened_post(home, post, step) for post in posts]
    answer["copy"] = {**summary, "written": written, "would_post": screened_posts}
    return dict(answer)


def screened_post(home: Home, post: dict[str, Any], step: Step) -> dict[str, Any]:
    """A post the step would have made, as the replay shows it: body and data, screened."""
    shown = {"to": post.get("to"), "body": post.get("body"), "data": post.get("data")}
    home.screen.check_json(shown, f"a post of the replay of {step.key}")
    return shown


async def ask_again(home: Home, recorded: Recorded, step: Step, judge: Judge) -> dict[str, Any]:
    """The step's answer, asked again in the sandbox: {"body", "data"} (and, for a step that
    writes files, "copy": what was copied and what it wrote in the copy)."""
    if sandbox.writes_files(home, step.nick):
        return await in_private_copy(home, recorded, step, judge)
    return await _run(home, recorded, step, judge, step.ask)


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
    copy = after.pop("copy", None)
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
        **({"copy": copy} if copy is not None else {}),
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

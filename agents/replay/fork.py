"""A fork: a new run that starts from a recorded run's step, with the replayed answer.

The new thread's starting ask is the parent's, plus `forked_from:
"THREAD@SEQ"` (SEQ: the forked step's ask) and `seeded`: the recorded answers
of every step asked before that one, and the replayed answer in its place.
The foreman's Run counts the seeds as answered (agents/foreman/pipeline.py),
so the pipeline carries on from there, through the two-turn gate, as any
run. Everything the fork was given is in that one verified ask: auditable in
the room, and the parent thread is never written to.
"""

from __future__ import annotations

import secrets
import sys
from typing import TYPE_CHECKING, Any

from agents.foreman.pipeline import FORKED_FROM, KEY, SEEDED
from agents.foreman.sequencer import pipeline_name
from agents.replay import rerun, sandbox
from agents.replay.recorded import FOREMAN
from agents.runtime.waiting import require_listening
from room import strictjson
from room.errors import UsageError
from room.message import MAX_DATA_BYTES

if TYPE_CHECKING:
    from agents.home import Home
    from agents.replay.recorded import Recorded, Step
    from agents.seats.request import Judge


def seeds(recorded: Recorded, step: Step, replayed: dict[str, Any]) -> list[dict[str, Any]]:
    """The recorded answers of the steps asked before `step`, then the replayed one."""
    earlier = [s for s in recorded.steps if s.ask.seq < step.ask.seq]
    found = [
        {KEY: s.key, "nick": s.nick, "body": s.answer.body, "data": dict(s.answer.data or {})}
        for s in earlier
    ]
    return [*found, {KEY: step.key, "nick": step.nick, **replayed}]


def start_data(recorded: Recorded, step: Step, replayed: dict[str, Any]) -> dict[str, Any]:
    data = {
        **recorded.run.request,
        FORKED_FROM: f"{recorded.thread}@{step.ask.seq}",
        SEEDED: seeds(recorded, step, replayed),
    }
    size = len(strictjson.dumps(data).encode("utf-8"))
    if size > MAX_DATA_BYTES:
        raise UsageError(
            f"the fork's starting ask would carry {size // 1024} KiB of recorded answers, over "
            f"the room's {MAX_DATA_BYTES // 1024} KiB; fork from an earlier step"
        )
    return data


def new_thread(parent: str) -> str:
    """A fresh thread with the parent's prefix (exp-…), so commands and views know its kind."""
    prefix = parent.split("-", 1)[0] if "-" in parent else "run"
    return f"{prefix}-{secrets.token_hex(4)}"


async def fork(
    home: Home,
    recorded: Recorded,
    key: str,
    seat: str | None,
    judge: Judge | None,
    wait: float,
    as_json: bool,
) -> int:
    """Replay `key`, start the fork with it, and (an expedition) follow it to its Dig Report."""
    if "@" in key:
        raise UsageError(
            f"{key} belongs to a redirected round; a fork carries step answers, not the "
            "operator's answers to earlier Dig Reports, so fork from a step of the first round "
            "and redirect the fork"
        )
    step = recorded.step(key)
    if sandbox.writes_files(home, step.nick):
        raise UsageError(
            f"--fork from {key} (@{step.nick}) is not done: that step writes files, its replay "
            "wrote them in a private copy that is gone when it ends, and the fork's later steps "
            "would look for them under the home. Replay it without --fork to compare answers, "
            "or fork from an earlier step that writes none"
        )
    result = await rerun.replay(home, recorded, key, seat, judge)
    replayed = {"body": result["replayed"]["body"], "data": result["replayed"]["data"]}
    data = start_data(recorded, step, replayed)
    thread = new_thread(recorded.thread)
    body = f"{recorded.run.start.body} (fork of {data[FORKED_FROM]})"
    async with home.client(home.society.operator) as client:
        await require_listening(client, FOREMAN)
        posted = await client.say(f"@{FOREMAN}", body, type="ask", data=data, thread=thread)
        print(
            f"fork {thread} started from {data[FORKED_FROM]} (step {key}, seat "
            f"{result['seat'] or 'configured'})",
            file=sys.stderr,
            flush=True,
        )
        if as_json:
            print(strictjson.dumps({"thread": thread, FORKED_FROM: data[FORKED_FROM], **result}))
        if pipeline_name(recorded.run.start) != "expedition":
            return 0
        from agents.expedition.command import Follower

        out = sys.stderr if as_json else sys.stdout
        follower = Follower(home, client, thread, out, sys.stderr)
        return await follower.follow(int(posted.get("seq", 0)), wait)

"""Where a replayed step runs: its own handler, reading the record, posting nothing.

A replay must leave the run as it was: no line in the room, no file the run
wrote touched. So the step gets a StepContext whose reads come from the
recorded thread (as it stood when the step was asked), which has no way to
post (a handler only returns its answer; the lurker, which posts, is not
here), and which runs in a temporary working folder. A step that writes
files by design (the brief, the backpass and build steps, whose outputs go
under the home's roots; WRITES) runs against a private copy of what its ask
names (agents/replay/copy.py, shadow.py). Any other handler is refused by
name, and so is an external program (`command`, `mcp_agent`): nothing can
promise what it writes, nor point it at a copy.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

from agents.runtime import handlers
from agents.runtime.outcome import Handler
from agents.runtime.services import StepServices
from agents.runtime.step import StepContext
from room.errors import UsageError
from room.message import Message

if TYPE_CHECKING:
    from agents.config import NickConfig
    from agents.home import Home
    from agents.replay.recorded import Recorded, Step
    from agents.seats.request import AnswerT, Judge, Judgment, JudgmentRequest
    from room.client import RoomClient

# The step handlers that read files and ask models but write nothing: safe to run again.
READ_ONLY = frozenset(
    {
        "agents.expedition.steps:build_context",
        "agents.expedition.steps:gen_terms",
        "agents.expedition.steps:retrieve_candidates",
        "agents.expedition.steps:score_batch",
        "agents.expedition.steps:pick_scotoma",
        "agents.expedition.late_steps:extract_excerpts",
    }
)

# The step handlers that write files under the home's roots: replayed against a private copy.
WRITES = frozenset(
    {
        "agents.expedition.late_steps:assemble_brief",
        "agents.backpass.steps:list_traces",
        "agents.backpass.steps:analyse",
        "agents.backpass.steps:check_quotes",
        "agents.backpass.steps:keep_ledger",
        "agents.backpass.steps:synthesize",
        "agents.build.steps:prepare_dir",
        "agents.build.steps:design_spec",
        "agents.build.steps:grind_spec",
    }
)


def writes_files(home: Home, nick: str) -> bool:
    """Whether `nick`'s step is replayed against a private copy (it writes files)."""
    config = home.society.nicks.get(nick)
    return config is not None and config.handler in WRITES


def why_not(home: Home, nick: str) -> str | None:
    """Why `nick`'s step cannot be replayed here, or None when it can."""
    config = home.society.nicks.get(nick)
    if config is None:
        return f"@{nick} has no [nicks.{nick}] table in this home's society.toml"
    if config.handler is None:
        return (
            f"@{nick} runs an external program; a replay cannot promise it writes no file, "
            "so it is not replayed"
        )
    if config.handler not in READ_ONLY | WRITES:
        return (
            f"@{nick}'s handler {config.handler} is not a pipeline step a replay knows what "
            "it reads and writes; replayable handlers are: " + ", ".join(sorted(READ_ONLY | WRITES))
        )
    return None


def nick_config(home: Home, nick: str) -> NickConfig:
    problem = why_not(home, nick)
    if problem is not None:
        raise UsageError(f"cannot replay this step: {problem}")
    return home.society.nicks[nick]


def load_handler(home: Home, nick: str) -> Handler:
    """The nick's configured handler, as its lurker would load it."""
    return handlers.load(nick_config(home, nick))


def seat_services(home: Home, nick: str) -> StepServices:
    """The nick's judge plumbing (its seats, its way through the gateway); it reads no room:
    the replay's reads are the record's."""
    return StepServices(home, nick, nick_config(home, nick), cast("RoomClient", None), frozenset())


def judge_through(services: StepServices, seat: str | None) -> Judge:
    """A judge that sends every role to `seat`, or (None) to the seat configured now."""

    async def judge(
        role: str,
        request: JudgmentRequest,
        schema: type[AnswerT],
        *,
        seat: str | None = seat,
    ) -> Judgment[AnswerT]:
        return await services.judge(role, request, schema, seat=seat)

    return judge


def context(home: Home, recorded: Recorded, step: Step, judge: Judge) -> StepContext:
    """The step's context: the record's reads, the given judge, no lessons, no way to post."""
    config = nick_config(home, step.nick)
    seen = recorded.through(step.ask.seq)

    async def read_thread(thread: str, through: int = 0) -> list[Message]:
        return [m for m in seen if m.thread == thread]

    return StepContext(
        nick=step.nick,
        home=home,
        options=dict(config.options),
        judge=judge,
        read_thread=read_thread,
    )


@contextlib.contextmanager
def scratch_folder() -> Iterator[str]:
    """Run in a fresh temporary folder: whatever a step writes relative to its working
    folder lands there and is removed after."""
    before = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="bullpen-replay-") as folder:
        os.chdir(folder)
        try:
            yield folder
        finally:
            os.chdir(before)

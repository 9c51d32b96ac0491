"""What a step agent is: a function from one room message to one reply.

A lurker calls its step with the message that woke it and a StepContext;
the step returns a Reply (body for people, data for machines) or raises
StepFailed, which the lurker posts as `[<NICK> FAILED — reason]`. A step may
be a plain function or a coroutine function; a plain one runs in a forked
child process, killed at its timeout (agents/runtime/forked.py).

Model judgments go through `ctx.judge`, never straight to a model: it picks
the role's seat, validates the JSON answer against a pydantic schema,
retries once with the error, falls back to the seat's fallback, and names
the seat that answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from room.errors import StepFailed
from room.message import Message

if TYPE_CHECKING:
    from agents.home import Home
    from agents.memory.lessons import Lesson
    from agents.seats.request import AnswerT, Judge, Judgment, JudgmentRequest

# Re-exported for steps, but imported on first use: importing agents.seats loads every
# seat kind, which an idle lurker does not need (docs/performance.md).
_FROM_SEATS = ("AnswerT", "Judge", "Judgment", "JudgmentRequest")


def __getattr__(name: str) -> Any:
    if name in _FROM_SEATS:
        from agents.seats import request

        return getattr(request, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AnswerT",
    "Judge",
    "Judgment",
    "JudgmentRequest",
    "Reply",
    "Step",
    "StepContext",
    "StepFailed",
]


@dataclass(frozen=True)
class Reply:
    """A step's answer: `body` is read by people, `data` by the next step."""

    body: str
    data: dict[str, Any] | None = None


@dataclass
class StepContext:
    """What a step may use besides its message."""

    nick: str
    home: Home
    options: dict[str, Any]
    judge: Judge
    # (thread, through): the thread, covering at least seq `through`
    read_thread: Callable[[str, int], Awaitable[list[Message]]]
    # (nick, window): messages to @nick among the room's last `window` lines
    read_to: Callable[[str, int], Awaitable[list[Message]]] | None = None
    # (thread, after, through): the thread's verified lines from trusted nicks after seq
    # `after`, covering at least `through`, and the seq the answer covers up to
    read_trusted: Callable[[str, int, int], Awaitable[tuple[list[Message], int]]] | None = None
    # this wake's lessons from shared memory (agents/runtime/lessons.py), each .id .ns .text
    lessons: list[Lesson] = field(default_factory=list)


class Step(Protocol):
    """A handler's call signature (`module:function` in a nick's table): the message that
    woke it and its context, positionally. It returns a Reply (or a coroutine of one); the
    runtime also takes an Outbox or a Failure (agents/runtime/outcome.py), so the result is
    checked there, at run time, not here."""

    def __call__(self, message: Message, ctx: StepContext, /) -> Any: ...

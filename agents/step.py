"""What a step agent is: a function from one room message to one reply.

A lurker calls its step with the message that woke it and a StepContext;
the step returns a Reply (body for people, data for machines) or raises
StepFailed, which the lurker posts as `[<NICK> FAILED — reason]`. A step may
be a plain function or a coroutine function; blocking work in a plain one
runs on a worker thread.

Model judgments go through `ctx.judge`, never straight to a model: it picks
the role's seat, validates the JSON answer against a pydantic schema,
retries once with the error, falls back to the seat's fallback, and names
the seat that answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from room.errors import StepFailed
from room.message import Message

if TYPE_CHECKING:
    from agents.home import Home

__all__ = [
    "Judge",
    "Judgment",
    "JudgmentRequest",
    "Reply",
    "Step",
    "StepContext",
    "StepFailed",
]

AnswerT = TypeVar("AnswerT", bound=BaseModel)


@dataclass(frozen=True)
class Reply:
    """A step's answer: `body` is read by people, `data` by the next step."""

    body: str
    data: dict[str, Any] | None = None


@dataclass(frozen=True)
class JudgmentRequest:
    """One bounded model call.

    `prompt` is self-contained and its first line is `step: <step>`; remote
    seats see only it. `payload` holds the same inputs as structured data,
    for the built-in local seat, which computes its answer from them.
    """

    step: str
    prompt: str
    payload: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        first = self.prompt.split("\n", 1)[0].strip()
        if first != f"step: {self.step}":
            raise ValueError(f"a prompt's first line must be 'step: {self.step}', not {first!r}")


@dataclass(frozen=True)
class Judgment(Generic[AnswerT]):
    """A validated answer and who gave it."""

    answer: AnswerT
    seat: str  # the [seats.<name>] table that answered
    kind: str  # local, openai or cmd
    role: str  # the role asked for
    fallback_used: bool = False
    attempts: int = 1

    def provenance(self) -> dict[str, Any]:
        """What a step's reply data says about the model call."""
        return {
            "seat": self.seat,
            "seat_kind": self.kind,
            "role": self.role,
            "fallback_used": self.fallback_used,
            "attempts": self.attempts,
        }


class Judge(Protocol):
    async def __call__(
        self, role: str, request: JudgmentRequest, schema: type[AnswerT]
    ) -> Judgment[AnswerT]: ...


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


Step = Callable[[Message, StepContext], "Reply | Awaitable[Reply]"]

"""What a model is asked and what it answered: the contract between a step and its seats.

A step builds a JudgmentRequest; the Judge (agents/seats/judge.py) sends it to
the role's seat, validates the answer against a pydantic schema, and hands
back a Judgment naming the seat that answered. Seats depend on this module
and on nothing of the runtime, so the runtime may depend on seats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

__all__ = ["AnswerT", "Judge", "Judgment", "JudgmentRequest"]

AnswerT = TypeVar("AnswerT", bound=BaseModel)


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

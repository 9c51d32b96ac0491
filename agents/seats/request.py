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

__all__ = ["AnswerSchema", "AnswerT", "Judge", "Judgment", "JudgmentRequest"]

AnswerT = TypeVar("AnswerT", bound=BaseModel)


@dataclass(frozen=True)
class AnswerSchema:
    """The JSON schema an answer must match, as a seat sends it to a server (`response_format`)."""

    name: str  # [A-Za-z0-9_-], at most 64 characters: what OpenAI accepts as json_schema.name
    schema: dict[str, Any]
    # Bounds too large for a grammar, dropped from `schema` (agents/seats/answerschema.py):
    # "<JSON pointer> <keyword> <value>" each, so a loosened schema is never a silent one.
    loosened: tuple[str, ...] = ()


@dataclass(frozen=True)
class JudgmentRequest:
    """One bounded model call.

    `prompt` is self-contained and its first line is `step: <step>`; remote
    seats see only it. `payload` holds the same inputs as structured data,
    for the built-in local seat, which computes its answer from them.
    `max_tokens` is the most the step's answer can need (a list of twelve
    terms is a few hundred): a seat asks for no more, so a weak model that
    runs on is cut off long before the seat's timeout. `answer_schema` is
    filled by the judge from the step's pydantic schema; a seat that can
    constrain a server's decoding sends it. `structured = False`: the answer
    is asked as text the step's schema reads itself (its `from_text`, e.g. a
    code block), so no response_format is sent. `temperature` and `seed`:
    this call's sampling, over the seat's own (a step's later attempts ask
    for another answer than its first, greedy one). `stop`: strings that end
    this answer, beside the seat's own (a code block's closing fence).
    """

    step: str
    prompt: str
    payload: dict[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None
    answer_schema: AnswerSchema | None = None
    structured: bool = True
    temperature: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        first = self.prompt.split("\n", 1)[0].strip()
        if first != f"step: {self.step}":
            raise ValueError(f"a prompt's first line must be 'step: {self.step}', not {first!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, not {self.max_tokens}")


@dataclass(frozen=True)
class Judgment(Generic[AnswerT]):
    """A validated answer and who gave it."""

    answer: AnswerT
    seat: str  # the [seats.<name>] table that answered
    kind: str  # local, openai or cmd
    role: str  # the role asked for
    fallback_used: bool = False
    attempts: int = 1
    # How the answering seat had the server hold the answer to the schema: "json_schema",
    # "json_object" or "prompt" (the prompt alone); None for seats that send no
    # response_format (local, cmd).
    structured: str | None = None
    # Why each failed attempt before the answer failed (a rejected answer's reason, a
    # seat's error): a retry that rescued the step is counted, not hidden.
    misses: tuple[str, ...] = ()
    # Tokens the servers counted over every attempt (`usage`); None when none counted any:
    # what `bullpen runs` sums as a run's tokens so far.
    tokens: int | None = None

    def provenance(self) -> dict[str, Any]:
        """What a step's reply data says about the model call."""
        said: dict[str, Any] = {
            "seat": self.seat,
            "seat_kind": self.kind,
            "role": self.role,
            "fallback_used": self.fallback_used,
            "attempts": self.attempts,
        }
        if self.structured is not None:
            said["structured"] = self.structured
        if self.misses:
            said["misses"] = list(self.misses)
        if self.tokens is not None:
            said["tokens"] = self.tokens
        return said


class Judge(Protocol):
    """The one call signature of every judge a step may hold (agents/seats/judge.py, the
    lurker's, the lessons wrapper, the replay's): mypy checks each against it, so a
    wrapper that drops an argument the others take is caught before a run meets it.

    `seat`: a run's choice of seat table for this call (`bullpen backpass --bulk SEAT`),
    else the nick's own, else the role's.
    """

    async def __call__(
        self,
        role: str,
        request: JudgmentRequest,
        schema: type[AnswerT],
        *,
        seat: str | None = None,
    ) -> Judgment[AnswerT]: ...

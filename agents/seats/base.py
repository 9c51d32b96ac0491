"""A seat: the model configuration of one role, reduced to one method.

Every kind — `local`, `openai`, `cmd` — turns a JudgmentRequest into the raw
text of a completion and nothing more. Parsing, validation, retries and
fallbacks belong to the judge, so a new kind is one small class.

A seat reports every failure it expects (a refused connection, a timeout, a
non-zero exit, a body of the wrong shape) as a SeatError whose message names
the seat and says what to check; the judge counts it as a failed attempt.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar

from agents.seats.request import JudgmentRequest
from room.errors import SeatError


@dataclass(frozen=True)
class Completion:
    """A seat's raw answer, and how the server was asked to hold it to the schema
    ("json_schema", "json_object", "prompt"; None for a seat that sends no such thing)."""

    text: str
    structured: str | None = None
    cut_off: bool = False  # the server stopped at max_tokens (finish_reason "length")
    # The server's own count (prompt + completion tokens) when it sent `usage`; None when
    # it did not, or for a seat with no server (local, cmd): never an estimate.
    tokens: int | None = None


class Seat(abc.ABC):
    """One `[seats.<name>]` table, ready to answer."""

    kind: ClassVar[str]

    def __init__(self, name: str, *, fallback: str | None = None) -> None:
        self.name = name
        self.fallback = fallback

    @abc.abstractmethod
    async def complete(self, request: JudgmentRequest) -> str:
        """The raw completion text for `request.prompt`, or SeatError."""

    async def answer(self, request: JudgmentRequest) -> Completion:
        """The completion with how it was constrained; a kind that constrains overrides it."""
        return Completion(await self.complete(request))

    def fail(self, reason: str) -> SeatError:
        """A SeatError naming this seat; `reason` alone is kept for the judge's summary."""
        return SeatError(f"{self}: {reason}", seat=self.name, kind=self.kind, reason=reason)

    def __str__(self) -> str:
        return f"seat '{self.name}' ({self.kind})"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} fallback={self.fallback!r}>"

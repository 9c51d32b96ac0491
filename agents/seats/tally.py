"""A run's model answers counted: how many, in how many attempts, how many a retry rescued,
and which gates the model missed on the way.

A weak model's misses are the baseline a better model must beat, so they
are counted, not hidden: each step's Judgment says its attempts and why
each attempt before the answer failed (`misses`), and a step with a gate
of its own (the terms' count and fan-out) says which it missed. A report
adds them up with `Tally.add` and shows `Tally.line()`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Tally", "gate_of", "judgments_of"]

_SCHEMA = re.compile(r"does not match the \S+ schema: (?P<where>[^:]+): (?P<what>[^:;]+)")
LABEL_MAX = 60


def gate_of(miss: str) -> str:
    """The gate one miss names, short and the same each time it is missed.

    A miss is "<seat>: <reason>" as the judge records it; the reason is an
    AnswerRejected message (not JSON, the schema's first complaint) or a
    seat's failure (no answer at all).
    """
    reason = miss.split(": ", 1)[1] if ": " in miss else miss
    if "was cut off at its max_tokens bound" in reason:
        return "answer within max_tokens"
    if "is not valid JSON" in reason:
        return "answer is JSON"
    if "the answer is empty" in reason:
        return "answer is not empty"
    match = _SCHEMA.search(reason)
    if match:
        where, what = match.group("where").strip(), match.group("what").strip()
        label = what if where == "the answer" else f"{where}: {what}"
        return label[:LABEL_MAX]
    return "seat answered"


def judgments_of(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The model calls' provenances one step's reply data names: a list under `judgments`,
    or one under `judgment` (the expedition's) or `provenance` (the backpass's)."""
    found = data.get("judgments")
    if isinstance(found, list):
        return [j for j in found if isinstance(j, dict)]
    for key in ("judgment", "provenance"):
        one = data.get(key)
        if isinstance(one, dict):
            return [one]
    return []


@dataclass
class Tally:
    """Model answers of one run (see the module docstring)."""

    answers: int = 0  # judgments that gave an answer
    attempts: int = 0  # model calls they took, failed ones included
    rescued: int = 0  # answers a retry rescued (a second attempt, or a step's own retry)
    missed: dict[str, int] = field(default_factory=dict)  # gate -> times missed

    def add(self, provenance: Mapping[str, Any] | None) -> None:
        """One Judgment's provenance (its reply data's `judgment`)."""
        if not provenance:
            return
        self.answers += 1
        attempts = int(provenance.get("attempts") or 1)
        self.attempts += attempts
        if attempts > 1:
            self.rescued += 1
        for miss in provenance.get("misses") or ():
            self.miss(gate_of(str(miss)))

    def add_all(self, provenances: Iterable[Mapping[str, Any] | None]) -> None:
        for provenance in provenances:
            self.add(provenance)

    def miss(self, gate: str, rescued: bool = False) -> None:
        """A gate missed once; `rescued`: the step's own retry then passed it."""
        self.missed[gate] = self.missed.get(gate, 0) + 1
        if rescued:
            self.rescued += 1

    def line(self) -> str:
        """'3 answers in 5 model calls; 1 rescued by a retry; missed: answer is JSON ×2'."""
        answers = f"{self.answers} answer{'s' if self.answers != 1 else ''}"
        text = f"{answers} in {self.attempts} model call{'s' if self.attempts != 1 else ''}"
        text += f"; {self.rescued} rescued by a retry"
        if self.missed:
            gates = ", ".join(f"{gate} ×{n}" for gate, n in sorted(self.missed.items()))
            text += f"; missed: {gates}"
        return text

    def data(self) -> dict[str, Any]:
        return {
            "answers": self.answers,
            "attempts": self.attempts,
            "rescued": self.rescued,
            "missed": dict(sorted(self.missed.items())),
        }

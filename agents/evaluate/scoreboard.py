"""The scoreboard: per seat assignment, cases passed, gates failed and how often, model calls,
tokens, retries that rescued a step, and wall time."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agents.evaluate.runners import CaseResult


@dataclass
class SeatScore:
    seat: str  # the seat put in every model role, or "configured"
    lessons: bool
    cases: list[CaseResult] = field(default_factory=list)
    home: str | None = None  # with --keep: the kept home, where its threads can be replayed

    def to_dict(self) -> dict[str, Any]:
        failed: Counter[str] = Counter(g for c in self.cases for g in c.failed_gates)
        return {
            "seat": self.seat,
            "home": self.home,
            "lessons": "on" if self.lessons else "off",
            "cases": len(self.cases),
            "passed": sum(c.passed for c in self.cases),
            "failed_gates": dict(sorted(failed.items())),
            "model_calls": sum(c.model_calls for c in self.cases),
            "server_calls": sum(c.server_calls for c in self.cases),
            "server_unanswered": sum(c.server_unanswered for c in self.cases),
            "tokens_in": sum(c.tokens_in for c in self.cases),
            "tokens_out": sum(c.tokens_out for c in self.cases),
            "tokens": sum(c.tokens for c in self.cases),
            "rescued": sum(c.rescued for c in self.cases),
            "lessons_handed": sum(c.lessons for c in self.cases),
            "wall_s": round(sum(c.wall_s for c in self.cases), 2),
            "results": [c.to_dict() for c in self.cases],
        }


def render(suite: str, scores: list[SeatScore]) -> str:
    """The scoreboard for a terminal: one row per seat, then each case's verdict."""
    rows = [s.to_dict() for s in scores]
    lines = [f"suite {suite}", ""]
    header = f"{'SEAT':<16} {'LESSONS':<7} {'PASSED':>7} {'CALLS':>6} {'TOKENS':>7} {'RESCUED':>7} {'WALL s':>8}"
    lines.append(header)
    for row in rows:
        lines.append(
            f"{row['seat']:<16} {row['lessons']:<7} {row['passed']:>3}/{row['cases']:<3} "
            f"{row['model_calls']:>6} {row['tokens']:>7} {row['rescued']:>7} {row['wall_s']:>8}"
        )
    for row in rows:
        lines.append("")
        lines.append(f"{row['seat']} (lessons {row['lessons']}):")
        for result in row["results"]:
            verdict = "pass" if result["passed"] else "FAIL " + ", ".join(result["failed_gates"])
            lines.append(f"  {result['case']:<24} {result['kind']:<10} {verdict}")
        if row["failed_gates"]:
            counts = ", ".join(f"{g} ×{n}" for g, n in row["failed_gates"].items())
            lines.append(f"  gates failed: {counts}")
    return "\n".join(lines)

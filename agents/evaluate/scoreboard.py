"""The scoreboard: per seat assignment (and round), cases passed, each step's pass rate,
gates failed and how often, model calls, tokens, retries that rescued a step, and wall time."""

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
    round: int = 1  # with --rounds: which round of the learning loop
    learned: str | None = None  # what the backpass after this round kept (rounds.learn)

    def steps(self) -> dict[str, dict[str, Any]]:
        """Each step's step cases: how many, passed, skipped (the seat cannot answer), rate."""
        found: dict[str, dict[str, Any]] = {}
        for case in self.cases:
            if case.step is None:
                continue
            row = found.setdefault(case.step, {"cases": 0, "passed": 0, "skipped": 0})
            row["cases"] += 1
            row["passed"] += case.passed
            row["skipped"] += case.skipped is not None
        for row in found.values():
            asked = row["cases"] - row["skipped"]
            row["rate"] = round(row["passed"] / asked, 3) if asked else None
        return dict(sorted(found.items()))

    def to_dict(self) -> dict[str, Any]:
        failed: Counter[str] = Counter(g for c in self.cases for g in c.failed_gates)
        return {
            "seat": self.seat,
            "round": self.round,
            "home": self.home,
            "lessons": "on" if self.lessons else "off",
            "cases": len(self.cases),
            "passed": sum(c.passed for c in self.cases),
            "skipped": sum(c.skipped is not None for c in self.cases),
            "steps": self.steps(),
            "failed_gates": dict(sorted(failed.items())),
            "model_calls": sum(c.model_calls for c in self.cases),
            "server_calls": sum(c.server_calls for c in self.cases),
            "server_unanswered": sum(c.server_unanswered for c in self.cases),
            "tokens_in": sum(c.tokens_in for c in self.cases),
            "tokens_out": sum(c.tokens_out for c in self.cases),
            "tokens": sum(c.tokens for c in self.cases),
            "rescued": sum(c.rescued for c in self.cases),
            "lessons_handed": sum(c.lessons for c in self.cases),
            "learned": self.learned,
            "wall_s": round(sum(c.wall_s for c in self.cases), 2),
            "results": [c.to_dict() for c in self.cases],
        }


def _rate(row: dict[str, Any]) -> str:
    asked = row["cases"] - row["skipped"]
    if not asked:
        return f"n/a ({row['skipped']} skipped)"
    text = f"{row['passed']}/{asked} {100 * row['rate']:.0f}%"
    return text + (f" ({row['skipped']} skipped)" if row["skipped"] else "")


def _verdict(result: dict[str, Any]) -> str:
    if result.get("skipped"):
        return "skipped: " + str(result["skipped"])
    return "pass" if result["passed"] else "FAIL " + ", ".join(result["failed_gates"])


def render(suite: str, scores: list[SeatScore]) -> str:
    """The scoreboard for a terminal: one row per seat and round, each step's pass rate per
    seat and round, then each case's verdict."""
    rows = [s.to_dict() for s in scores]
    lines = [f"suite {suite}", ""]
    lines.append(
        f"{'SEAT':<16} {'ROUND':>5} {'LESSONS':<7} {'PASSED':>9} {'SKIP':>4} {'CALLS':>6} "
        f"{'TOKENS':>7} {'RESCUED':>7} {'WALL s':>8}"
    )
    for row in rows:
        asked = row["cases"] - row["skipped"]
        lines.append(
            f"{row['seat']:<16} {row['round']:>5} {row['lessons']:<7} "
            f"{row['passed']:>4}/{asked:<4} {row['skipped']:>4} {row['model_calls']:>6} "
            f"{row['tokens']:>7} {row['rescued']:>7} {row['wall_s']:>8}"
        )
    steps = sorted({step for row in rows for step in row["steps"]})
    if steps:
        lines += ["", "per step (step cases passed / asked):"]
        lines.append(f"{'SEAT':<16} {'ROUND':>5} " + " ".join(f"{s:<16}" for s in steps))
        for row in rows:
            cells = [_rate(row["steps"][s]) if s in row["steps"] else "-" for s in steps]
            lines.append(
                f"{row['seat']:<16} {row['round']:>5} " + " ".join(f"{c:<16}" for c in cells)
            )
    for row in rows:
        lines.append("")
        lines.append(f"{row['seat']} round {row['round']} (lessons {row['lessons']}):")
        for result in row["results"]:
            kind = result.get("step") or result["kind"]
            lines.append(f"  {result['case']:<32} {kind:<10} {_verdict(result)}")
        if row["failed_gates"]:
            counts = ", ".join(f"{g} ×{n}" for g, n in row["failed_gates"].items())
            lines.append(f"  gates failed: {counts}")
        if row["learned"]:
            lines.append(f"  after this round: {row['learned']}")
    return "\n".join(lines)

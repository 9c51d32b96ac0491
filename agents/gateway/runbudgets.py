"""Per-run budgets: `[budgets]` in society.toml, one table per run kind.

    [budgets]
    expedition = { tokens = 200000, cost = 0.50 }
    build = { calls = 400 }

A run is a thread, and its kind is the thread's prefix (`exp-…` is an
expedition, `build-…` a build, `backpass-…` a backpass; a fork keeps its
parent's). A seat going through the gateway names the thread of the step it
answers (`x-bullpen-thread`), and the gateway holds each call's worst case
against the run's budget as against a caller's (budgets.py): the call that
would pass it is refused (429, `run:THREAD:tokens`), the step fails loud
saying so, and the foreman stops the run there with that line in the room.
A run's budget is its whole life, not a day: a restart counts the run's
ledger lines back in.

A run may also be started with a budget of its own (`bullpen expedition
--budget tokens=20000`, and build, backpass): its ticket carries it, the
foreman copies it into every step's ask, and a seat sends it with each call
(`x-bullpen-budget: tokens=20000`). It can only tighten: the gateway holds
the run to the lower of it and `[budgets]`, per limit, so a seat that leaves
it out or sends a higher one gets no more than society.toml allows. Each
ledger line records the run budget it was held to (`run_budget`), so a
restart and the cost page know it too.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.config import parse_section

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["THREAD", "RunBudget", "RunBudgets", "parse_budget", "run_kind", "tighter"]

THREAD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
# The thread prefixes the pipelines' commands give their runs (agents/*/command.py).
KINDS = {"exp": "expedition", "build": "build", "backpass": "backpass"}


class RunBudget(BaseModel):
    """One run kind's budget for a whole run; None is no limit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    calls: int | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)
    cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)


def parse_budget(text: str) -> RunBudget:
    """`tokens=20000,calls=40,cost=0.5` (any of them, at least one) as a RunBudget; a
    ValueError saying what is wrong otherwise (the command's exit 2, the gateway's 400)."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or key not in RunBudget.model_fields or not value.strip():
            raise ValueError(
                f"{part.strip()[:60]!r} is not a budget; give calls=N, tokens=N or cost=X, "
                "comma-separated (e.g. tokens=20000,calls=40)"
            )
        if key in fields:
            raise ValueError(f"{key} is given twice")
        fields[key] = value.strip()
    try:
        return RunBudget.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}: {first['msg']} (a whole number for calls and tokens, "
                         "a number for cost, none below 0)") from None  # fmt: skip


def tighter(first: RunBudget | None, second: RunBudget | None) -> RunBudget | None:
    """The lower of two budgets, limit by limit (None: no limit there)."""
    if first is None or second is None:
        return first or second

    def low(a: float | None, b: float | None) -> float | None:
        return b if a is None else a if b is None else min(a, b)

    return RunBudget(
        calls=low(first.calls, second.calls),  # type: ignore[arg-type]  # ints stay ints
        tokens=low(first.tokens, second.tokens),  # type: ignore[arg-type]
        cost=low(first.cost, second.cost),
    )


def run_kind(thread: str) -> str:
    """The run's kind from its thread: `exp-1a2b` → expedition; an unknown prefix as it is."""
    prefix = thread.split("-", 1)[0]
    return KINDS.get(prefix, prefix)


class RunBudgets:
    def __init__(self, kinds: dict[str, RunBudget]) -> None:
        self.kinds = kinds
        self.asked: dict[str, RunBudget] = {}  # thread → the budget its own run was given

    @classmethod
    def of(cls, home: Home) -> RunBudgets:
        """The home's `[budgets]` table; a ConfigError names the key to fix."""
        return cls(
            {
                kind: parse_section(RunBudget, table, f"budgets.{kind}", home.society_file)
                for kind, table in home.society.budgets.items()
            }
        )

    def ask(self, thread: str, budget: RunBudget | None) -> None:
        """A run's own budget, as a call for it named it: kept, the tightest seen."""
        if budget is not None:
            self.asked[thread] = tighter(self.asked.get(thread), budget) or budget

    def for_thread(self, thread: str) -> RunBudget | None:
        """The run's budget: its kind's under [budgets], tightened by its own."""
        return tighter(self.kinds.get(run_kind(thread)), self.asked.get(thread))

    def own(self, thread: str) -> bool:
        """Whether the run has a budget of its own (--budget), to name it when it is spent."""
        return thread in self.asked

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
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from agents.config import parse_section

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["THREAD", "RunBudget", "RunBudgets", "run_kind"]

THREAD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
# The thread prefixes the pipelines' commands give their runs (agents/*/command.py).
KINDS = {"exp": "expedition", "build": "build", "backpass": "backpass"}


class RunBudget(BaseModel):
    """One run kind's budget for a whole run; None is no limit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    calls: int | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)
    cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)


def run_kind(thread: str) -> str:
    """The run's kind from its thread: `exp-1a2b` → expedition; an unknown prefix as it is."""
    prefix = thread.split("-", 1)[0]
    return KINDS.get(prefix, prefix)


class RunBudgets:
    def __init__(self, kinds: dict[str, RunBudget]) -> None:
        self.kinds = kinds

    @classmethod
    def of(cls, home: Home) -> RunBudgets:
        """The home's `[budgets]` table; a ConfigError names the key to fix."""
        return cls(
            {
                kind: parse_section(RunBudget, table, f"budgets.{kind}", home.society_file)
                for kind, table in home.society.budgets.items()
            }
        )

    def for_thread(self, thread: str) -> RunBudget | None:
        return self.kinds.get(run_kind(thread))

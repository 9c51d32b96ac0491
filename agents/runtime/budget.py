"""A step's time budget: its nick's `timeout_s`, raised for the model seats its calls go to.

A nick's `timeout_s` is the time one ask may take. It assumed a server that answers a
step's calls side by side: the scorer's four batches, sent at once to a server with one
slot, are answered one after another, and the last waited out the 120 s budget. So a
seat table may say how its server is to be waited for (docs/seats.md, "Time budgets"):

    step_timeout_s = 900   # any step whose calls go to this seat may take this long
    slots = 1              # the server answers this many requests at once (--parallel)

and the budget of a nick whose calls go to that seat (its `seat`, else the roles its
handler asks, and their fallbacks) is the largest of its own `timeout_s`, the seats'
`step_timeout_s`, and `timeout_s` × the waves its `concurrency` needs on `slots`
(4 asks on 1 slot: 4 × timeout_s). The lurker runs the handler with it, and the foreman
reports the step overdue only after it, so the two never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents.config import NickConfig, SocietyConfig

# The model roles each pipeline handler asks (a build's code seats are its tiers, and its
# grinder has its own grind_timeout_s): what a nick's budget follows when it has no `seat`.
HANDLER_ROLES: dict[str, tuple[str, ...]] = {
    "agents.expedition.steps:gen_terms": ("termgen",),
    "agents.expedition.steps:score_batch": ("score",),
    "agents.expedition.steps:pick_scotoma": ("scotoma",),
    "agents.backpass.steps:analyse": ("bulk",),
    "agents.backpass.steps:synthesize": ("synthesis",),
}
MAX_FALLBACKS = 16  # a fallback chain is checked for loops when seats are built; stop anyway


def _seats(tables: Mapping[str, Any], first: list[str]) -> list[Mapping[str, Any]]:
    """The tables named, and each one's fallbacks, in order, each once."""
    found: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    for name in first:
        for _ in range(MAX_FALLBACKS):
            table = tables.get(name)
            if name in seen or not isinstance(table, Mapping):
                break
            seen.add(name)
            found.append(table)
            name = str(table.get("fallback") or "")
    return found


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return float(value) if ok else None


def step_budget(society: SocietyConfig, nick: NickConfig) -> float:
    """How long one ask of `nick` may take (see the module docstring)."""
    names = [nick.seat] if nick.seat else list(HANDLER_ROLES.get(nick.handler or "", ()))
    budget = nick.timeout_s
    for table in _seats(society.seats, names):
        step_s = _number(table.get("step_timeout_s"))
        if step_s is not None:
            budget = max(budget, step_s)
        slots = _number(table.get("slots"))
        if slots is not None:
            budget = max(budget, nick.timeout_s * math.ceil(nick.concurrency / slots))
    return budget


def with_budget(society: SocietyConfig, nick: NickConfig) -> NickConfig:
    """The nick's table with `timeout_s` as its step budget: what its lurker runs with."""
    budget = step_budget(society, nick)
    return nick if budget == nick.timeout_s else nick.model_copy(update={"timeout_s": budget})

"""The cost view: the gateway ledger summed per run, seat, nick and day, and budgets' use.

Read from the ledger alone (agents/gateway/usage.py sums it, as `bullpen
gateway usage` does), so the page and the command always agree. Costs are
shown only for models with a price in `[gateway.prices]` (none by default).
A budget at NEAR or more of its limit is "near": `near_limit` lists them for
the society page and for `bullpen runs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents.gateway.usage import Usage
    from agents.home import Home

__all__ = ["NEAR", "CostView", "cost_view", "near_limit"]

NEAR = 0.8  # a budget this full (or fuller) is shown as close to its limit
GROUPS = ("thread", "seat", "caller", "day")


@dataclass
class CostView:
    rows: dict[str, dict[str, Usage]] = field(default_factory=dict)  # by → name → usage
    budgets: list[dict[str, Any]] = field(default_factory=list)
    thread: str | None = None


def _entries(home: Home) -> tuple[Any, list[dict[str, Any]]] | None:
    if not home.has_gateway:
        return None
    from agents.gateway.config import GatewayConfig
    from agents.gateway.ledger import read_entries

    config = GatewayConfig.of(home)
    path = config.ledger_path(home)
    return config, list(read_entries(path)) if path.exists() else []


def _use(home: Home, config: Any, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from agents.gateway.budgets import Budgets
    from agents.gateway.runbudgets import RunBudgets

    budgets = Budgets(config, RunBudgets.of(home))
    budgets.restore(entries)
    shown = budgets.use()
    for item in shown:
        item["share"] = (item["used"] / item["limit"]) if item["limit"] else 1.0
        item["near"] = item["share"] >= NEAR
    return shown


def cost_view(home: Home, thread: str | None = None) -> CostView | None:
    """The page's figures (one run's when `thread` is given); None: no gateway configured."""
    from agents.gateway.usage import summarize

    found = _entries(home)
    if found is None:
        return None
    config, entries = found
    use = _use(home, config, entries)
    if thread is not None:
        entries = [e for e in entries if e.get("thread") == thread]
        use = [u for u in use if u["budget"].startswith(f"run:{thread}:")]
    groups = ("seat", "caller", "day") if thread else GROUPS
    return CostView({by: summarize(entries, by, None) for by in groups}, use, thread)


def near_limit(home: Home) -> list[str]:
    """One line per budget at NEAR of its limit or more (for the society page and `bullpen
    runs`): `caller:scorer:tokens 912 of 1000 (91%)`; [] with no gateway."""
    found = _entries(home)
    if found is None:
        return []
    config, entries = found
    return [
        f"{u['budget']} {u['used']:.6g} of {u['limit']:.6g} ({u['share']:.0%})"
        for u in _use(home, config, entries)
        if u["near"]
    ]

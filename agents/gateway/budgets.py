"""Budgets, fail closed: calls, tokens and cost per UTC day, calls in flight, and per run.

Kept per caller, per backend and per run (the thread a seat names in
`x-bullpen-thread`, limited by `[budgets]` for its kind, runbudgets.py). A
call is admitted only when every budget it touches has room for its *worst
case* (reserve.py: its prompt's bound and its max_tokens times n, at the
model's price): it counts as a call from admission (so eight concurrent
calls cannot all squeeze under a limit of one), its worst case is held
while it runs, and when it ends the hold is given back and its real usage
added. However many calls race the last of a budget, the held and the spent
together never pass the limit, so the spend cannot either (as long as the
backend honours max_tokens, which every OpenAI-compatible server does; a
call whose usage passed its reservation is flagged OVER_RESERVATION). Over budget is a 429 whose JSON names the budget,
what was used, the limit and when it resets. At start the counters are
restored from today's ledger lines, so a restart does not refill a budget.

What a call counts is decided from its ledger line by one function,
`charge`, which the live accounting (`release`) and the restore both use,
so a restart never changes a figure:

- a refused call (flag OVER_BUDGET or SECRET_REFUSED) was never sent: it
  counts nothing, so one spent caller's refusals cannot fill a backend's
  budget for every other caller;
- a failed call (status 502: the backend gave no usable answer after the
  retries) counts nothing either: its admission is given back;
- any other call counts once, with its tokens in and out, each taken as at
  least 0, so a backend's negative `usage` can never refill a budget.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agents.gateway.config import Budget, GatewayConfig
from agents.gateway.reserve import Worst
from agents.gateway.runbudgets import RunBudget, RunBudgets
from room.errors import BullpenError

__all__ = [
    "OVER_BUDGET",
    "OVER_RESERVATION",
    "SECRET_REFUSED",
    "Budgets",
    "OverBudget",
    "Ticket",
    "charge",
    "charge_cost",
]

OVER_BUDGET = "OVER_BUDGET"
OVER_RESERVATION = "OVER_RESERVATION"  # the backend spent more than max_tokens allowed
SECRET_REFUSED = "SECRET_REFUSED"
REFUSED = frozenset({OVER_BUDGET, SECRET_REFUSED})
FAILED = 502


class OverBudget(BullpenError):
    """A budget has no room for this call (429).

    Its headers tell an OpenAI client whether to retry (the openai SDKs read
    `x-should-retry` first, then `retry-after-ms` / `retry-after`): a day's
    budget that is spent will not have room in a second, so `x-should-retry:
    false` and `Retry-After` the seconds to midnight (UTC); a full in-flight
    budget has room as soon as a call ends, so a retry after a second may pass.
    """

    code = "budget"
    status = 429

    def __init__(self, message: str, *, retry_after: int, retry: bool, **details: Any) -> None:
        super().__init__(message, **details)
        self.headers = {"retry-after": str(retry_after), "x-should-retry": str(retry).lower()}


def today() -> str:
    return datetime.now(UTC).date().isoformat()


def next_midnight() -> str:
    now = datetime.now(UTC)
    midnight = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    return midnight.isoformat().replace("+00:00", "Z")


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def charge(entry: dict[str, Any]) -> int | None:
    """The tokens a ledger line counts against budgets, or None when it counts as no call."""
    flags = entry.get("flags")
    if isinstance(flags, list) and REFUSED.intersection(f for f in flags if isinstance(f, str)):
        return None
    if entry.get("status") == FAILED:
        return None
    return _count(entry.get("tokens_in")) + _count(entry.get("tokens_out"))


def charge_cost(entry: dict[str, Any]) -> float:
    """The cost a ledger line counts (0 when refused, failed or unpriced)."""
    cost = entry.get("cost")
    if charge(entry) is None or not isinstance(cost, int | float) or isinstance(cost, bool):
        return 0.0
    return float(cost) if 0 <= cost < 1e12 else 0.0


def seconds_to_midnight() -> int:
    now = datetime.now(UTC)
    midnight = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    return max(1, int((midnight - now).total_seconds()) + 1)


def _own(value: object) -> RunBudget | None:
    """A ledger line's `run_budget` (the run's own --budget), or None when it has none."""
    if not isinstance(value, dict):
        return None
    try:
        return RunBudget.model_validate(value)
    except ValueError:
        return None


NOTHING = Worst(0, 0)  # what a call with no bound and no token budget holds


@dataclass(frozen=True)
class Limit:
    """One budget a call touches: whose, over which period ("" for a run's whole life)."""

    kind: str  # caller, backend or run
    name: str
    day: str
    calls: int | None
    tokens: int | None
    cost: float | None
    in_flight: int | None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.name, self.day)

    @property
    def table(self) -> str:
        return {
            "caller": f"[gateway.callers.{self.name}]",
            "backend": f"[gateway.backends.{self.name}]",
        }.get(self.kind, "[budgets] (or the run's own --budget)")


def _daily(kind: str, name: str, day: str, budget: Budget) -> Limit:
    return Limit(
        kind,
        name,
        day,
        budget.calls_per_day,
        budget.tokens_per_day,
        budget.cost_per_day,
        budget.in_flight,
    )


@dataclass(frozen=True)
class Ticket:
    """One admitted call: the budgets it was counted against and the worst case held."""

    caller: str
    backend: str
    day: str
    limits: tuple[Limit, ...] = ()
    worst: Worst = NOTHING


class Budgets:
    def __init__(self, config: GatewayConfig, runs: RunBudgets | None = None) -> None:
        self.config = config
        self.runs = runs or RunBudgets({})
        self.calls: dict[tuple[str, str, str], int] = defaultdict(int)  # (kind, name, day)
        self.tokens: dict[tuple[str, str, str], int] = defaultdict(int)
        self.cost: dict[tuple[str, str, str], float] = defaultdict(float)
        self.held_tokens: dict[tuple[str, str, str], int] = defaultdict(int)
        self.held_cost: dict[tuple[str, str, str], float] = defaultdict(float)
        self.in_flight: dict[tuple[str, str], int] = defaultdict(int)

    def _limits(self, caller: str, backend: str, thread: str | None) -> list[Limit]:
        day = today()
        limits = [
            _daily("caller", caller, day, self.config.caller_budget(caller)),
            _daily("backend", backend, day, self.config.backends[backend].budget),
        ]
        run = self.runs.for_thread(thread) if thread else None
        if thread and run is not None:
            limits.append(Limit("run", thread, "", run.calls, run.tokens, run.cost, None))
        return limits

    def room(self, caller: str, backend: str, thread: str | None, worst: Worst) -> int | None:
        """The most completion tokens the tightest token or cost budget leaves this call
        once its prompt is held (None: no such budget; < 1: no room)."""
        rooms: list[int] = []
        for limit in self._limits(caller, backend, thread):
            key = limit.key
            if limit.tokens is not None:
                rooms.append(limit.tokens - self.tokens[key] - self.held_tokens[key] - worst.prompt)
            if limit.cost is not None and worst.price is not None:
                left = limit.cost - self.cost[key] - self.held_cost[key]
                left -= worst.price.cost(worst.prompt, 0)
                per_token = worst.price.output_per_mtok / 1e6
                rooms.append(int(left / per_token) if per_token > 0 else 2**31)
        return min(rooms) if rooms else None

    def admit(
        self, caller: str, backend: str, thread: str | None = None, worst: Worst | None = None
    ) -> Ticket:
        """Count the call in and hold its worst case, or raise OverBudget naming the first
        budget without room for it."""
        worst = worst or NOTHING
        limits = self._limits(caller, backend, thread)
        refusal = self._refusal(limits, worst)
        if refusal is not None:
            raise refusal
        for limit in limits:
            self.calls[limit.key] += 1
            self.in_flight[(limit.kind, limit.name)] += 1
            self.held_tokens[limit.key] += worst.tokens
            self.held_cost[limit.key] += worst.cost or 0.0
        return Ticket(caller, backend, limits[0].day, tuple(limits), worst)

    def refusal(self, caller: str, backend: str, thread: str | None = None) -> OverBudget | None:
        """Why a call now would be refused, or None; the budget hook asks this, counting nothing."""
        return self._refusal(self._limits(caller, backend, thread), NOTHING)

    def _refusal(self, limits: list[Limit], worst: Worst) -> OverBudget | None:
        for limit in limits:
            key = limit.key
            used_calls = self.calls[key]
            if limit.calls is not None and used_calls >= limit.calls:
                return self._over(limit, "calls", used_calls, limit.calls)
            if limit.tokens is not None:
                used, held = self.tokens[key], self.held_tokens[key]
                if used >= limit.tokens or used + held + worst.tokens > limit.tokens:
                    return self._over(limit, "tokens", used, limit.tokens, held, worst.tokens)
            if limit.cost is not None:
                if worst.tokens and worst.cost is None:
                    return self._unpriced(limit, worst)
                spent, held_cost = self.cost[key], self.held_cost[key]
                if spent >= limit.cost or spent + held_cost + (worst.cost or 0.0) > limit.cost:
                    return self._over(limit, "cost", spent, limit.cost, held_cost, worst.cost)
            busy = self.in_flight[(limit.kind, limit.name)]
            if limit.in_flight is not None and busy >= limit.in_flight:
                return self._over(limit, "in_flight", busy, limit.in_flight)
        return None

    def release(self, ticket: Ticket, entry: dict[str, Any]) -> None:
        """The call has ended with this ledger line: give back its hold and charge what it
        really used to the period it was admitted in."""
        tokens = charge(entry)
        cost = charge_cost(entry)
        limits = ticket.limits or tuple(self._limits(ticket.caller, ticket.backend, None))
        for limit in limits:
            key = limit.key
            flight = (limit.kind, limit.name)
            self.in_flight[flight] = max(0, self.in_flight[flight] - 1)
            self.held_tokens[key] = max(0, self.held_tokens[key] - ticket.worst.tokens)
            self.held_cost[key] = max(0.0, self.held_cost[key] - (ticket.worst.cost or 0.0))
            if tokens is None:  # admitted, but it counts as no call: give the admission back
                self.calls[key] = max(0, self.calls[key] - 1)
            else:
                self.tokens[key] += tokens
                self.cost[key] += cost

    def restore(self, entries: Iterable[dict[str, Any]]) -> None:
        """Count today's ledger lines (and every line of a run) back in after a restart, as
        `release` counted them."""
        day = today()
        for entry in entries:
            tokens = charge(entry)
            if tokens is None:
                continue
            cost = charge_cost(entry)
            keys = []
            if str(entry.get("ts", "")).startswith(day):
                keys += [
                    (kind, name, day)
                    for kind in ("caller", "backend")
                    if isinstance(name := entry.get(kind), str) and name
                ]
            thread = entry.get("thread")
            if isinstance(thread, str) and thread:
                keys.append(("run", thread, ""))
                self.runs.ask(thread, _own(entry.get("run_budget")))
            for key in keys:
                self.calls[key] += 1
                self.tokens[key] += tokens
                self.cost[key] += cost

    def use(self) -> list[dict[str, Any]]:
        """Every budget with a limit and what is spent on it (today's, and each run's): the
        cost page's figures, and `near_limit`'s."""
        shown: list[dict[str, Any]] = []
        day = today()
        seen = {name for kind, name, period in self.calls if kind == "caller" and period == day}
        names = {"caller": set(self.config.callers) | seen, "backend": set(self.config.backends)}
        limits = [
            _daily("caller", name, day, self.config.caller_budget(name))
            for name in sorted(names["caller"])
        ]
        limits += [
            _daily("backend", name, day, self.config.backends[name].budget)
            for name in sorted(names["backend"])
        ]
        for kind, name, period in list(self.calls):
            run = self.runs.for_thread(name) if kind == "run" else None
            if run is not None:
                limits.append(Limit("run", name, period, run.calls, run.tokens, run.cost, None))
        for limit in limits:
            for what, cap, used in (
                ("calls", limit.calls, self.calls[limit.key]),
                ("tokens", limit.tokens, self.tokens[limit.key]),
                ("cost", limit.cost, self.cost[limit.key]),
            ):
                if cap is not None:
                    shown.append(
                        {"budget": f"{limit.kind}:{limit.name}:{what}", "used": used, "limit": cap}
                    )
        return shown

    def _unpriced(self, limit: Limit, worst: Worst) -> OverBudget:
        return OverBudget(
            f"the {limit.kind} {limit.name} has a cost budget, but the model {worst.model!r} "
            "has no price, so its cost cannot be held before the call; add it under "
            "[gateway.prices] or lift the cost budget",
            budget=f"{limit.kind}:{limit.name}:cost",
            used=self.cost[limit.key],
            limit=limit.cost,
            retry_after=seconds_to_midnight(),
            retry=False,
        )

    def _over(
        self,
        limit: Limit,
        what: str,
        used: float,
        cap: float,
        held: float = 0,
        worst: float | None = 0,
    ) -> OverBudget:
        if limit.kind == "run":
            resets, wait, again = (
                "never: it is this run's whole budget",
                seconds_to_midnight(),
                False,
            )
        elif what == "in_flight":
            resets, wait, again = "when a call ends", 1, True
        else:
            resets, wait, again = "at " + next_midnight(), seconds_to_midnight(), False
        name = what if limit.kind == "run" or what == "in_flight" else f"{what}_per_day"
        shown = f"{used:.6g} used"
        if held or worst:
            shown += f", {held:.6g} held by calls in flight, this call may take {worst or 0:.6g}"
        return OverBudget(
            f"the {limit.kind} {limit.name} is over its budget {name} ({shown}, of {cap:.6g}); "
            f"it resets {resets}. Raise it in {limit.table} or wait",
            budget=f"{limit.kind}:{limit.name}:{name}",
            used=used,
            limit=cap,
            held=held,
            resets_at=resets.removeprefix("at "),
            retry_after=wait,
            retry=again,
        )

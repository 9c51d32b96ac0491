"""Budgets, fail closed: calls and tokens per UTC day, and calls in flight.

Kept per caller and per backend. A call is admitted only when every budget
it touches has room; it counts as a call from admission (so eight
concurrent calls cannot all squeeze under a limit of one), and its tokens
are added when it ends. Over budget is a 429 whose JSON names the budget,
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
from room.errors import BullpenError

__all__ = ["OVER_BUDGET", "SECRET_REFUSED", "Budgets", "OverBudget", "Ticket", "charge"]

OVER_BUDGET = "OVER_BUDGET"
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


def seconds_to_midnight() -> int:
    now = datetime.now(UTC)
    midnight = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    return max(1, int((midnight - now).total_seconds()) + 1)


@dataclass(frozen=True)
class Ticket:
    """One admitted call: who it was counted against."""

    caller: str
    backend: str
    day: str


class Budgets:
    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.calls: dict[tuple[str, str, str], int] = defaultdict(int)  # (kind, name, day)
        self.tokens: dict[tuple[str, str, str], int] = defaultdict(int)
        self.in_flight: dict[tuple[str, str], int] = defaultdict(int)

    def _limits(self, caller: str, backend: str) -> list[tuple[str, str, Budget]]:
        return [
            ("caller", caller, self.config.caller_budget(caller)),
            ("backend", backend, self.config.backends[backend].budget),
        ]

    def admit(self, caller: str, backend: str) -> Ticket:
        """Count the call in, or raise OverBudget naming the first budget without room."""
        refusal = self.refusal(caller, backend)
        if refusal is not None:
            raise refusal
        day = today()
        for kind, name, _ in self._limits(caller, backend):
            self.calls[(kind, name, day)] += 1
            self.in_flight[(kind, name)] += 1
        return Ticket(caller, backend, day)

    def refusal(self, caller: str, backend: str) -> OverBudget | None:
        """Why a call now would be refused, or None; the budget hook asks this, counting nothing."""
        day = today()
        for kind, name, budget in self._limits(caller, backend):
            used_calls = self.calls[(kind, name, day)]
            if budget.calls_per_day is not None and used_calls >= budget.calls_per_day:
                return self._over(kind, name, "calls_per_day", used_calls, budget.calls_per_day)
            used_tokens = self.tokens[(kind, name, day)]
            if budget.tokens_per_day is not None and used_tokens >= budget.tokens_per_day:
                return self._over(kind, name, "tokens_per_day", used_tokens, budget.tokens_per_day)
            busy = self.in_flight[(kind, name)]
            if budget.in_flight is not None and busy >= budget.in_flight:
                return self._over(
                    kind, name, "in_flight", busy, budget.in_flight, "when a call ends"
                )
        return None

    def release(self, ticket: Ticket, entry: dict[str, Any]) -> None:
        """The call has ended with this ledger line: charge it to the day it was admitted on."""
        tokens = charge(entry)
        for kind, name in (("caller", ticket.caller), ("backend", ticket.backend)):
            self.in_flight[(kind, name)] = max(0, self.in_flight[(kind, name)] - 1)
            if tokens is None:  # admitted, but it counts as no call: give the admission back
                key = (kind, name, ticket.day)
                self.calls[key] = max(0, self.calls[key] - 1)
            else:
                self.tokens[(kind, name, ticket.day)] += tokens

    def restore(self, entries: Iterable[dict[str, Any]]) -> None:
        """Count today's ledger lines back in after a restart, as `release` counted them."""
        day = today()
        for entry in entries:
            if not str(entry.get("ts", "")).startswith(day):
                continue
            tokens = charge(entry)
            if tokens is None:
                continue
            for kind in ("caller", "backend"):
                name = entry.get(kind)
                if isinstance(name, str) and name:
                    self.calls[(kind, name, day)] += 1
                    self.tokens[(kind, name, day)] += tokens

    def _over(
        self, kind: str, name: str, what: str, used: int, limit: int, resets: str | None = None
    ) -> OverBudget:
        resets_at = resets or next_midnight()
        wait = 1 if resets else seconds_to_midnight()
        table = f"[gateway.callers.{name}]" if kind == "caller" else f"[gateway.backends.{name}]"
        return OverBudget(
            f"the {kind} {name} is over its budget {what} ({used} used of {limit}); it resets "
            f"{resets_at if resets else 'at ' + resets_at}. Raise it in {table} or wait",
            budget=f"{kind}:{name}:{what}",
            used=used,
            limit=limit,
            resets_at=resets_at,
            retry_after=wait,
            retry=resets is not None,
        )

"""Budgets, fail closed: calls and tokens per UTC day, and calls in flight.

Kept per caller and per backend. A call is admitted only when every budget
it touches has room; it counts as a call from admission (so eight
concurrent calls cannot all squeeze under a limit of one), and its tokens
are added when it ends. Over budget is a 429 whose JSON names the budget,
what was used, the limit and when it resets. At start the counters are
restored from today's ledger lines, so a restart does not refill a budget.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agents.gateway.config import Budget, GatewayConfig
from room.errors import BullpenError

__all__ = ["Budgets", "OverBudget", "Ticket"]


class OverBudget(BullpenError):
    """A budget has no room for this call (429)."""

    code = "budget"
    status = 429


def today() -> str:
    return datetime.now(UTC).date().isoformat()


def next_midnight() -> str:
    now = datetime.now(UTC)
    midnight = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    return midnight.isoformat().replace("+00:00", "Z")


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

    def release(self, ticket: Ticket, tokens: int) -> None:
        """The call has ended; add its tokens to the day it was admitted on."""
        for kind, name in (("caller", ticket.caller), ("backend", ticket.backend)):
            self.in_flight[(kind, name)] = max(0, self.in_flight[(kind, name)] - 1)
            self.tokens[(kind, name, ticket.day)] += max(0, tokens)

    def restore(self, entries: Iterable[dict[str, Any]]) -> None:
        """Count today's ledger lines back in after a restart."""
        day = today()
        for entry in entries:
            if not str(entry.get("ts", "")).startswith(day):
                continue
            tokens = int(entry.get("tokens_in") or 0) + int(entry.get("tokens_out") or 0)
            for kind in ("caller", "backend"):
                name = entry.get(kind)
                if isinstance(name, str) and name:
                    self.calls[(kind, name, day)] += 1
                    self.tokens[(kind, name, day)] += tokens

    def _over(
        self, kind: str, name: str, what: str, used: int, limit: int, resets: str | None = None
    ) -> OverBudget:
        resets_at = resets or next_midnight()
        table = f"[gateway.callers.{name}]" if kind == "caller" else f"[gateway.backends.{name}]"
        return OverBudget(
            f"the {kind} {name} is over its budget {what} ({used} used of {limit}); it resets "
            f"{resets_at if resets else 'at ' + resets_at}. Raise it in {table} or wait",
            budget=f"{kind}:{name}:{what}",
            used=used,
            limit=limit,
            resets_at=resets_at,
        )

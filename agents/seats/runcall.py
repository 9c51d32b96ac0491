"""The run a model call is made for: the thread and the room seq of the ask being answered.

The lurker sets it around a step's handler (agents/runtime/handlers.py); a
seat that goes through the gateway sends it along (`x-bullpen-thread`,
`x-bullpen-seq` and a W3C `traceparent` naming the step's span, in the
trace the ask's own `traceparent` names), so the gateway's ledger ties each
call to its run (the cost page, per-run budgets) and a trace hangs the call
under its step. A run started with `--budget` carries it in every step's
ask (`budget`), and the seat sends it as `x-bullpen-budget`: the gateway
holds the run to the tighter of it and `[budgets]`. A context variable, so the
steps of several runs handled at once each keep their own, and a forked
step's child inherits it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from room.traceids import parse_traceparent, step_traceparent

__all__ = ["RunCall", "current", "headers", "within"]


BUDGET_KEYS = ("calls", "tokens", "cost")


@dataclass(frozen=True)
class RunCall:
    thread: str
    seq: int
    trace: str | None = None  # the run's trace id, from the ask's traceparent
    budget: str | None = None  # the run's own budget as a header: calls=N,tokens=N,cost=X


def _budget(value: object) -> str | None:
    """The ask's `budget` ({"tokens": 2000, …}) as the x-bullpen-budget header, or None."""
    if not isinstance(value, dict):
        return None
    parts = [
        f"{key}={value[key]}"
        for key in BUDGET_KEYS
        if isinstance(value.get(key), int | float) and not isinstance(value.get(key), bool)
    ]
    return ",".join(parts) or None


_CURRENT: ContextVar[RunCall | None] = ContextVar("bullpen_run_call", default=None)


def current() -> RunCall | None:
    return _CURRENT.get()


@contextlib.contextmanager
def within(thread: str | None, seq: int | None, data: object = None) -> Iterator[None]:
    """Calls made inside are made for this ask, whose `data` may carry the run's trace
    context and budget (nothing is set without a thread)."""
    if not thread or not seq:
        yield
        return
    carried = parse_traceparent(data.get("traceparent")) if isinstance(data, dict) else None
    budget = _budget(data.get("budget")) if isinstance(data, dict) else None
    token = _CURRENT.set(RunCall(thread, seq, carried[0] if carried else None, budget))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def headers() -> dict[str, str]:
    """The headers naming the current run for the gateway (none outside a step)."""
    run = current()
    if run is None:
        return {}
    sent = {
        "x-bullpen-thread": run.thread,
        "x-bullpen-seq": str(run.seq),
        "traceparent": step_traceparent(run.thread, run.seq, run.trace),
    }
    if run.budget:
        sent["x-bullpen-budget"] = run.budget
    return sent

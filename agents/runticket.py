"""What every run's ticket carries besides its pipeline's own request.

    traceparent   the W3C trace context of the run (its root span,
                  room/traceids.py): the foreman copies it into each step's
                  ask, so every process that works on the run exports its
                  spans into one trace (docs/telemetry.md)
    budget        the run's own budget (`--budget tokens=20000,calls=40`),
                  copied the same way; the seats send it to the gateway, which
                  holds the run to it as to `[budgets]` (agents/gateway/runbudgets.py)

The commands that start a run (`bullpen expedition`, `build`, `backpass`)
add these to their ticket's data; the foreman carries them (CARRIED in
agents/foreman/sequencer.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from room.traceids import run_traceparent

if TYPE_CHECKING:
    from agents.gateway.runbudgets import RunBudget

__all__ = ["ticket_context"]


def ticket_context(thread: str, budget: RunBudget | None = None) -> dict[str, Any]:
    """The trace context and the run's own budget, for the ticket of the run `thread`."""
    context: dict[str, Any] = {"traceparent": run_traceparent(thread)}
    if budget is not None:
        context["budget"] = budget.model_dump(exclude_none=True)
    return context

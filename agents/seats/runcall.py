"""The run a model call is made for: the thread and the room seq of the ask being answered.

The lurker sets it around a step's handler (agents/runtime/handlers.py); a
seat that goes through the gateway sends it along (`x-bullpen-thread`,
`x-bullpen-seq` and a W3C `traceparent` naming the step's span), so the
gateway's ledger ties each call to its run (the cost page, per-run budgets)
and a trace hangs the call under its step. A context variable, so the
steps of several runs handled at once each keep their own, and a forked
step's child inherits it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["RunCall", "current", "headers", "within"]


@dataclass(frozen=True)
class RunCall:
    thread: str
    seq: int


_CURRENT: ContextVar[RunCall | None] = ContextVar("bullpen_run_call", default=None)


def current() -> RunCall | None:
    return _CURRENT.get()


@contextlib.contextmanager
def within(thread: str | None, seq: int | None) -> Iterator[None]:
    """Calls made inside are made for this ask (nothing is set without a thread)."""
    if not thread or not seq:
        yield
        return
    token = _CURRENT.set(RunCall(thread, seq))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def headers() -> dict[str, str]:
    """The headers naming the current run for the gateway (none outside a step)."""
    run = current()
    if run is None:
        return {}
    from room.traceids import step_traceparent

    return {
        "x-bullpen-thread": run.thread,
        "x-bullpen-seq": str(run.seq),
        "traceparent": step_traceparent(run.thread, run.seq),
    }

"""Deterministic trace and span ids: the same run gets the same ids wherever it is looked at.

Here in room/ (stdlib only) because they are derived from room concepts, threads and
seqs, and because a seat and the gateway name a step's span with them without
loading the telemetry package (agents/telemetry).

A run's trace id is derived from its thread, a step's span id from the
thread and the room seq of its ask, a model call's span id is the gateway's
call id (its ledger line's `id`). So a span exported live by one process, a
span another process exports later, and `bullpen trace` reading the room
after the fact all agree, with nothing to hand from process to process but
the room line itself, and a trace survives any restart.
"""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "TRACEPARENT",
    "call_span_id",
    "child_span_id",
    "parse_traceparent",
    "run_span_id",
    "run_trace_id",
    "run_traceparent",
    "step_span_id",
    "step_traceparent",
    "trace_id",
]

TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
_HEX16 = re.compile(r"[0-9a-f]{16}")


def _digest(text: str, size: int) -> str:
    value = hashlib.sha256(("bullpen " + text).encode()).hexdigest()[: size * 2]
    return value if value.strip("0") else "1".rjust(size * 2, "0")  # never the invalid zero id


def trace_id(thread: str) -> str:
    """The run's trace id (32 hex digits)."""
    return _digest(f"trace {thread}", 16)


def run_span_id(thread: str) -> str:
    """The run's root span (16 hex digits)."""
    return _digest(f"run {thread}", 8)


def step_span_id(thread: str, ask_seq: int) -> str:
    """The span of the step asked for at room seq `ask_seq`."""
    return _digest(f"step {thread} {ask_seq}", 8)


def call_span_id(call_id: str) -> str:
    """A gateway call's span: its ledger id when that is 16 hex digits, else derived from it."""
    return call_id if _HEX16.fullmatch(call_id) and call_id.strip("0") else _digest(call_id, 8)


def child_span_id(parent: str, name: str) -> str:
    """A span within another (a grind iteration, a fenced test run), named by its place."""
    return _digest(f"child {parent} {name}", 8)


def step_traceparent(thread: str, ask_seq: int, trace: str | None = None) -> str:
    """The W3C traceparent of a step's span: what a model call made for it names as parent
    (`trace`: the run's trace id as its ticket carries it, else derived from the thread)."""
    return f"00-{trace or trace_id(thread)}-{step_span_id(thread, ask_seq)}-01"


def run_traceparent(thread: str) -> str:
    """The traceparent a command puts in a run's ticket (data `traceparent`): it names the
    run's root span; the foreman copies it into every step's ask, so whoever answers one
    knows the trace without asking anyone (the context is in the room, not in memory)."""
    return f"00-{trace_id(thread)}-{run_span_id(thread)}-01"


def run_trace_id(data: object, thread: str) -> str:
    """The trace id a line belongs to: its data's `traceparent`'s when it carries a valid
    one, else the one derived from its thread (a run started before traceparents)."""
    carried = parse_traceparent(data.get("traceparent")) if isinstance(data, dict) else None
    return carried[0] if carried else trace_id(thread)


def parse_traceparent(value: object) -> tuple[str, str] | None:
    """(trace id, parent span id) from a W3C traceparent, or None when it is not one."""
    if not isinstance(value, str):
        return None
    found = TRACEPARENT.fullmatch(value.strip())
    if found is None or not found.group(1).strip("0") or not found.group(2).strip("0"):
        return None
    return found.group(1), found.group(2)

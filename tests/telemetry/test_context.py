"""The trace context a room line carries, read the same way by every process."""

from __future__ import annotations

from typing import Any

from agents.seats import runcall
from agents.telemetry.process import handled_span
from agents.telemetry.tree import run_spans
from room.message import Message
from room.traceids import run_span_id, run_traceparent, step_span_id, trace_id

FOREIGN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"  # a caller's own trace


def line(seq: int, sender: str, to: str, kind: str, data: dict[str, Any], **more: Any) -> dict:
    return {"seq": seq, "id": f"m{seq}", "ts": f"2026-12-04T10:00:0{seq}.000Z", "from": sender,
            "to": to, "type": kind, "body": "b", "data": data, "thread": "exp-0c0c0c0c",
            "verified": True, **more}  # fmt: skip


def test_a_lurker_hangs_its_work_under_the_step_its_ask_names() -> None:
    """A foreman's ask: under the step span its own seq names, in the ticket's trace; the
    ticket itself (the foreman's wake on it): under the run; an ask without a traceparent, or
    with one that does not parse: no span."""
    context = {"traceparent": run_traceparent("exp-0c0c0c0c"), "key": "terms"}
    step = Message.model_validate(line(7, "foreman", "@termgen", "ask", context))
    span = handled_span(step, "termgen", 1, "reply", None)
    assert span is not None and span.trace_id == trace_id("exp-0c0c0c0c")
    assert span.parent_id == step_span_id("exp-0c0c0c0c", 7)
    assert span.attributes["bullpen.room.seq"] == 7 and span.error is None
    ticket = Message.model_validate(line(1, "operator", "@foreman", "ask", context))
    wake = handled_span(ticket, "foreman", 1, "failure", "it broke")
    assert wake is not None and wake.parent_id == run_span_id("exp-0c0c0c0c")
    assert wake.error == "it broke"
    for data in ({}, {"traceparent": "00-zz-yy-01"}, {"traceparent": "00-" + "0" * 32 + "-1"}):
        bare = Message.model_validate(line(8, "foreman", "@termgen", "ask", data))
        assert handled_span(bare, "termgen", 1, "reply", None) is None


def test_a_ticket_with_a_callers_trace_keeps_it_and_hangs_the_run_under_its_span() -> None:
    lines = [
        line(1, "operator", "@foreman", "ask", {"pipeline": "relay", "traceparent": FOREIGN}),
        line(2, "foreman", "@echo", "ask", {"key": "relay/1", "traceparent": FOREIGN}),
    ]
    spans = run_spans(lines, [], ["operator", "foreman", "echo"])
    assert {s.trace_id for s in spans} == {"0af7651916cd43dd8448eb211c80319c"}
    root = next(s for s in spans if s.span_id == run_span_id("exp-0c0c0c0c"))
    assert root.parent_id == "b7ad6b7169203331"


def test_a_seat_sends_the_asks_trace_and_the_runs_own_budget() -> None:
    data = {"traceparent": FOREIGN, "budget": {"tokens": 2000, "cost": 0.5, "nonsense": 1}}
    with runcall.within("exp-0c0c0c0c", 9, data):
        sent = runcall.headers()
    assert sent["traceparent"] == (
        f"00-0af7651916cd43dd8448eb211c80319c-{step_span_id('exp-0c0c0c0c', 9)}-01"
    )
    assert sent["x-bullpen-budget"] == "tokens=2000,cost=0.5"
    with runcall.within("exp-0c0c0c0c", 9, {}):
        plain = runcall.headers()
    assert plain["traceparent"].split("-")[1] == trace_id("exp-0c0c0c0c")
    assert "x-bullpen-budget" not in plain
    assert runcall.headers() == {}

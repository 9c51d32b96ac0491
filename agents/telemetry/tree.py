"""A run as a trace: its spans built from the room's thread and the gateway's ledger alone.

    run {pipeline}                 the thread, from the operator's ask to its last line
      invoke_agent {nick}          one per step: the foreman's ask → the nick's reply
        chat {model}               one per gateway call made for that ask (ledger `seq`)
        grind iteration {n}        a build's iterations (the grinder's announcements)
          fenced test run          the spec run inside the fence, within its iteration

Every id is derived (room/traceids.py), so what a process exports live and what
`bullpen trace` rebuilds here name the same spans. Each span carries the
room seqs it came from (`bullpen.room.seq`, and for a step the ask's and the
reply's), so one can go from a span to its audited line and back. Model
calls follow the OpenTelemetry GenAI conventions (gen_ai.*), with
OpenInference's names beside them (llm.*, openinference.span.kind), which
Phoenix shows as token counts. No prompt, answer or body is put on a span
unless `capture_content` is asked, and then only after the secret screen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agents.web.runs import RunView, Step, build_run
from room.traceids import (
    call_span_id,
    child_span_id,
    parse_traceparent,
    run_span_id,
    run_trace_id,
    step_span_id,
    trace_id,
)

__all__ = ["SpanRecord", "call_record", "iteration_records", "run_spans"]

Attr = str | int | float | bool | list[str]
CONTENT_CHARS = 4000  # at most this much of a body on a span, when content is captured


@dataclass
class SpanRecord:
    """One span, ready for any exporter: ids in hex, times in nanoseconds since the epoch."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    start_ns: int
    end_ns: int
    kind: str = "internal"  # internal | client
    error: str | None = None  # the status description when the span failed
    attributes: dict[str, Attr] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_id": self.parent_id,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "kind": self.kind,
            "error": self.error,
            "attributes": self.attributes,
        }


def _ns(ts: Any) -> int | None:
    try:
        when = datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(when.timestamp() * 1_000_000_000)


def _seq(line: dict[str, Any] | None) -> int | None:
    value = (line or {}).get("seq")
    return value if isinstance(value, int) else None


class _Builder:
    def __init__(self, run: RunView, content: bool, screen: Any) -> None:
        self.run = run
        data = run.start.get("data") or {}
        self.trace = run_trace_id(data, run.thread)  # the ticket's traceparent's, when it has one
        self.root = run_span_id(run.thread)
        carried = parse_traceparent(data.get("traceparent"))
        # A ticket whose traceparent names another span (a caller's own trace) hangs the run
        # under it; the one a bullpen command writes names the run's root span itself.
        self.above = carried[1] if carried and carried[1] != self.root else None
        self.content = content
        self.screen = screen
        self.spans: list[SpanRecord] = []

    def text(self, value: Any) -> str | None:
        """A body for a span when content is captured: screened, cut; else None."""
        if not self.content or not isinstance(value, str):
            return None
        if self.screen is not None and self.screen.find(value) is not None:
            return "(withheld: it held a secret)"
        return value[:CONTENT_CHARS]

    def root_span(self, end_ns: int) -> None:
        run, start = self.run, self.run.start
        attributes: dict[str, Attr] = {
            "bullpen.thread": run.thread,
            "bullpen.pipeline": run.pipeline,
            "bullpen.run.state": run.state,
            "bullpen.room.seq": _seq(start) or 0,
            "bullpen.nick": str(start.get("from", "")),
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "foreman",
            "gen_ai.conversation.id": run.thread,
            "openinference.span.kind": "CHAIN",
            "session.id": run.thread,
        }
        if (body := self.text(start.get("body"))) is not None:
            attributes["input.value"] = body
        self.spans.append(
            SpanRecord(
                f"run {run.pipeline}",
                self.trace,
                self.root,
                self.above,
                _ns(start.get("ts")) or end_ns,
                end_ns,
                error="the run failed" if run.state == "failed" else None,
                attributes=attributes,
            )
        )

    def step_span(self, step: Step, end_ns: int) -> str:
        ask_seq = _seq(step.ask) or 0
        span_id = step_span_id(self.run.thread, ask_seq)
        reply = step.reply or {}
        data = reply.get("data") or {}
        attributes: dict[str, Attr] = {
            "bullpen.thread": self.run.thread,
            "bullpen.nick": step.nick,
            "bullpen.step.key": step.key,
            "bullpen.step.state": step.state,
            "bullpen.room.seq": ask_seq,
            "bullpen.room.ask_seq": ask_seq,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": step.nick,
            "gen_ai.conversation.id": self.run.thread,
            "openinference.span.kind": "AGENT",
            "session.id": self.run.thread,
        }
        if (reply_seq := _seq(step.reply)) is not None:
            attributes["bullpen.room.reply_seq"] = reply_seq
        gates = _gates(data)
        attributes["bullpen.step.gates"] = gates or ["passed" if step.reply else "pending"]
        if step.seat:
            attributes["bullpen.seat"] = step.seat
        if isinstance(data.get("attempts"), int):
            attributes["bullpen.step.attempts"] = data["attempts"]
        for key, shown in (
            ("input.value", step.ask.get("body")),
            ("output.value", reply.get("body")),
        ):
            if (text := self.text(shown)) is not None:
                attributes[key] = text
        end = _ns(reply.get("ts")) or _ns((step.overdue or {}).get("ts")) or end_ns
        start = _ns(step.ask.get("ts")) or end
        error = None
        if step.state in ("failed", "overdue"):
            error = "; ".join(step.flags) or step.state
        self.spans.append(
            SpanRecord(
                f"invoke_agent {step.nick}",
                self.trace,
                span_id,
                self.root,
                start,
                max(start, end),
                error=error,
                attributes=attributes,
            )
        )
        return span_id

    def call_span(self, entry: dict[str, Any], parent: str, seat: str | None) -> None:
        span = call_record(entry, self.run.thread, parent, seat, self.trace)
        if span is not None:
            self.spans.append(span)

    def _open_step(self, line: dict[str, Any]) -> str:
        """The step a progress line belongs to: its nick's step asked before it and not yet
        answered (a grinder announces its iterations while its step runs)."""
        seq = _seq(line) or 0
        for step in reversed(self.run.steps):
            asked, replied = _seq(step.ask) or 0, _seq(step.reply)
            if step.nick == line.get("from") and asked < seq and (replied or seq) >= seq:
                return step_span_id(self.run.thread, asked)
        return self.root

    def iteration_spans(self, lines: list[dict[str, Any]]) -> None:
        previous: dict[str, int] = {}  # parent span → where its last iteration ended
        for line in lines:
            data = line.get("data") or {}
            if data.get("kind") != "grind-iteration" or (end := _ns(line.get("ts"))) is None:
                continue
            parent = self._open_step(line)
            self.spans += iteration_records(
                line, self.run.thread, self.trace, parent, previous.get(parent)
            )
            previous[parent] = end


def iteration_records(
    line: dict[str, Any], thread: str, trace: str, parent: str, after_ns: int | None = None
) -> list[SpanRecord]:
    """A grind iteration's span and its fenced test run's, from the grinder's announcement
    (a room line's dict; its `ts` is when the iteration ended), under `parent` (the grind's
    step): what `bullpen trace` rebuilds and the grinder exports live, with the same ids.
    `after_ns`: where the previous iteration ended, else the announcement's own duration."""
    data = line.get("data") or {}
    end = _ns(line.get("ts"))
    if end is None:
        return []
    number = data.get("iteration")
    start = after_ns or end - int(float(data.get("iteration_ms") or 0) * 1e6)
    span_id = child_span_id(parent, f"iteration {number}")
    seq = _seq(line) or 0
    attributes: dict[str, Attr] = {
        "bullpen.thread": thread,
        "bullpen.room.seq": seq,
        "bullpen.grind.tier": str(data.get("tier", "")),
        "bullpen.grind.iteration": number if isinstance(number, int) else 0,
        "bullpen.grind.passing": _count(data.get("passing")),
        "bullpen.grind.total": _count(data.get("total")),
        "bullpen.grind.green": bool(data.get("green")),
        "openinference.span.kind": "CHAIN",
    }
    spans = [
        SpanRecord(
            f"grind iteration {number}",
            trace,
            span_id,
            parent,
            min(start, end),
            end,
            error=str(data["problem"])[:300] if data.get("problem") else None,
            attributes=attributes,
        )
    ]
    test_ms = data.get("test_ms")
    if isinstance(test_ms, int | float) and test_ms >= 0:
        fence = data.get("fence")
        spans.append(
            SpanRecord(
                "fenced test run",
                trace,
                child_span_id(span_id, "test run"),
                span_id,
                max(min(start, end), end - int(test_ms * 1e6)),
                end,
                attributes={
                    "bullpen.thread": thread,
                    "bullpen.room.seq": seq,
                    "bullpen.test.passing": _count(data.get("passing")),
                    "bullpen.test.total": _count(data.get("total")),
                    "bullpen.test.fence": str(fence)[:200] if fence else "none",
                    "openinference.span.kind": "TOOL",
                },
            )
        )
    return spans


def call_record(
    entry: dict[str, Any],
    thread: str,
    parent: str,
    seat: str | None = None,
    trace: str | None = None,
) -> SpanRecord | None:
    """The span of one gateway call (a ledger line), under `parent` in `trace` (else the
    thread's derived trace): what `bullpen trace` and the gateway's live export both make."""
    end = _ns(entry.get("ts"))
    if end is None:
        return None
    latency = entry.get("latency_ms")
    start = end - int(float(latency) * 1e6) if isinstance(latency, int | float) else end
    model = str(entry.get("model", ""))
    tokens_in, tokens_out = _count(entry.get("tokens_in")), _count(entry.get("tokens_out"))
    status = entry.get("status")
    attributes: dict[str, Attr] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",  # the gateway speaks the OpenAI API
        "gen_ai.request.model": model,
        "gen_ai.response.model": str(entry.get("response_model") or model),
        "gen_ai.usage.input_tokens": tokens_in,
        "gen_ai.usage.output_tokens": tokens_out,
        "gen_ai.conversation.id": thread,
        "bullpen.thread": thread,
        "bullpen.nick": str(entry.get("caller", "")),
        "bullpen.gateway.backend": str(entry.get("backend", "")),
        "bullpen.gateway.call_id": str(entry.get("id", "")),
        "bullpen.gateway.status": status if isinstance(status, int) else 0,
        "bullpen.gateway.attempts": _count(entry.get("attempts")) or 1,
        "bullpen.gateway.retries": max(0, (_count(entry.get("attempts")) or 1) - 1),
        "bullpen.usage.estimated": bool(entry.get("estimated")),
        "openinference.span.kind": "LLM",
        "llm.model_name": model,
        "llm.token_count.prompt": tokens_in,
        "llm.token_count.completion": tokens_out,
        "llm.token_count.total": tokens_in + tokens_out,
        "session.id": thread,
    }
    seat = seat or (entry.get("seat") if isinstance(entry.get("seat"), str) else None)
    if seat:
        attributes["bullpen.seat"] = seat
    if isinstance(entry.get("seq"), int):
        attributes["bullpen.room.seq"] = entry["seq"]
    reasons = entry.get("finish_reasons")
    if isinstance(reasons, list) and reasons:
        attributes["gen_ai.response.finish_reasons"] = [str(r) for r in reasons]
    if isinstance(entry.get("cost"), int | float):
        attributes["bullpen.cost"] = float(entry["cost"])
    flags = [str(f) for f in entry.get("flags") or []]
    if flags:
        attributes["bullpen.gateway.flags"] = flags
    error = None
    if not isinstance(status, int) or status >= 400:
        error = f"HTTP {status}" + (f" ({', '.join(flags)})" if flags else "")
        attributes["error.type"] = str(status)
    return SpanRecord(
        f"chat {model}",
        trace or trace_id(thread),
        call_span_id(str(entry.get("id") or f"{entry.get('ts')}{model}")),
        parent,
        start,
        max(start, end),
        kind="client",
        error=error,
        attributes=attributes,
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _gates(data: dict[str, Any]) -> list[str]:
    """A step's gates' outcome as its reply says it: flags raised, failed, fallback."""
    gates = [str(f) for f in data.get("flags") or [] if isinstance(f, str)]
    if data.get("failed"):
        gates.append("failed")
    if data.get("fallback_used"):
        gates.append("fallback seat")
    return gates


def run_spans(
    lines: list[dict[str, Any]],
    ledger: Iterable[dict[str, Any]],
    trusted: Iterable[str],
    *,
    content: bool = False,
    screen: Any = None,
) -> list[SpanRecord]:
    """The spans of the run whose thread `lines` are (dicts as in room.jsonl), with the
    ledger's calls made for it; [] when the lines hold no run."""
    trusted = frozenset(trusted)
    run = build_run(lines, trusted)
    if run is None:
        return []
    calls = [e for e in ledger if e.get("thread") == run.thread]
    ends = [n for n in (_ns(line.get("ts")) for line in lines) if n is not None]
    ends += [n for n in (_ns(e.get("ts")) for e in calls) if n is not None]
    end_ns = max(ends) if ends else 0
    builder = _Builder(run, content, screen)
    builder.root_span(end_ns)
    by_seq: dict[int, tuple[str, str | None]] = {}
    for step in run.steps:
        span_id = builder.step_span(step, end_ns)
        if (seq := _seq(step.ask)) is not None:
            by_seq[seq] = (span_id, step.seat)
    for entry in calls:
        parent, seat = by_seq.get(entry.get("seq") or 0, (builder.root, None))
        builder.call_span(entry, parent, seat)
    counted = [m for m in lines if m.get("verified") is True and m.get("from") in trusted]
    builder.iteration_spans(counted)  # as for the steps: verified lines of trusted nicks
    return builder.spans

"""`bullpen trace THREAD [--otlp [URL]] [--json]`: a finished (or running) run as a trace.

Read from the room's thread and the gateway's ledger alone, so a run
recorded with telemetry off can still be looked at, in a terminal or in
whatever OTLP receiver the operator runs. The ids are the ones live export
uses (room/traceids.py): exporting a run twice sends the same spans again, which a
receiver keeps as one trace.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from agents.home import Home
from agents.telemetry.config import TelemetryConfig, traces_url
from agents.telemetry.tree import SpanRecord, run_spans
from room.errors import UsageError

__all__ = ["cmd_trace", "ledger_entries", "trace_of"]


def ledger_entries(home: Home) -> list[dict[str, Any]]:
    """The gateway ledger's lines, or none when the home has no gateway."""
    if not home.society.gateway:
        return []
    from agents.gateway.config import GatewayConfig
    from agents.gateway.ledger import read_entries

    return list(read_entries(GatewayConfig.of(home).ledger_path(home)))


def trace_of(home: Home, thread: str, *, content: bool = False) -> list[SpanRecord]:
    """The run's spans; UsageError (exit 2) when the room has no run with that thread."""
    from agents.replay.recorded import read_thread

    messages = asyncio.run(read_thread(home, thread))
    lines = [m.model_dump(mode="json", by_alias=True) for m in messages]
    spans = run_spans(
        lines, ledger_entries(home), home.trust.trusted, content=content, screen=home.screen
    )
    if not spans:
        raise UsageError(
            f"there is no run with the thread {thread!r} in the room (no verified ask to the "
            "foreman opens it); `bullpen runs` lists the runs"
        )
    return spans


def _tree(spans: list[SpanRecord]) -> str:
    children: dict[str | None, list[SpanRecord]] = {}
    for span in spans:
        children.setdefault(span.parent_id, []).append(span)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: (s.start_ns, s.name)):
            a = span.attributes
            took = (span.end_ns - span.start_ns) / 1e9
            extra = []
            if "bullpen.room.seq" in a:
                extra.append(f"seq {a['bullpen.room.seq']}")
            if "gen_ai.usage.input_tokens" in a:
                extra.append(
                    f"{a['gen_ai.usage.input_tokens']} in / {a['gen_ai.usage.output_tokens']} out"
                )
            if "bullpen.step.key" in a:
                extra.append(f"step {a['bullpen.step.key']}")
            if span.error:
                extra.append(f"ERROR {span.error[:120]}")
            lines.append(f"{'  ' * depth}{span.name}  {took:.2f} s  " + "  ".join(extra))
            walk(span.span_id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)


def cmd_trace(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    config = TelemetryConfig.of(home)
    spans = trace_of(home, args.thread, content=config.capture_content)
    if args.json:
        print(json.dumps([span.as_dict() for span in spans], indent=2))
    else:
        print(f"trace {spans[0].trace_id}  ({len(spans)} spans)")
        print(_tree(spans))
    if args.otlp is not None:
        url = traces_url(args.otlp) if args.otlp else config.endpoint()
        if url is None:
            raise UsageError(
                "--otlp has no URL and none is configured; give one (--otlp "
                "http://127.0.0.1:4318) or set [telemetry] otlp_endpoint"
            )
        from agents.telemetry.export import export_spans

        sent = export_spans(spans, url, config.service_name)
        print(f"exported {sent} spans to {url}", file=sys.stderr)
    return 0

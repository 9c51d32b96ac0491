"""The spans a society's processes make live, each under the context the room line carries.

A run's ticket carries a W3C `traceparent` naming the run's root span (the
command that starts it writes it, room/traceids.py: run_traceparent), and
the foreman copies it into every step's ask. So whoever reads an ask knows
its trace without asking anyone, and names the step's span from the ask's
own seq (step_span_id): the context is in the room, not in a process's
memory, and survives any restart.

    the foreman    a step's span (`invoke_agent NICK`, ask → reply) once it is
                   answered or overdue, and the run's root span at its final report
    a lurker       `handle NICK`: its work on one ask, under the step's span
    the grinder    `grind iteration N` and its `fenced test run` (agents/build/steps.py)
    the gateway    `chat MODEL`, under the step its seat's `traceparent` header names

The spans are the ones `bullpen trace` rebuilds from the room afterwards
(agents/telemetry/tree.py), with the same ids, so exporting a run again adds
nothing twice. Used only when a process has an exporter (live.py); with
telemetry off nothing here is imported.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from agents.telemetry.tree import SpanRecord, run_spans
from agents.web.runs import FOREMAN
from room.traceids import child_span_id, parse_traceparent, step_span_id

if TYPE_CHECKING:
    from agents.runtime.outcome import OutPost
    from room.message import Message

__all__ = ["ForemanSpans", "handled_ids", "handled_span", "handled_traceparent"]


class SpanSink(Protocol):
    """Where finished spans go: agents/telemetry/live.py's exporter (named by its one
    method, so this module and live.py, which imports it lazily, make no circle)."""

    def submit(self, span: SpanRecord) -> None: ...


ENDED = ("done", "failed", "cancelled")
THREADS = 1000  # runs whose sent spans the foreman remembers (a restart resends: same ids)


def handled_ids(message: Message, nick: str) -> tuple[str, str, str] | None:
    """(trace id, span id, parent span id) of `nick`'s work on an ask that carries a trace
    context; None for any other line."""
    carried = parse_traceparent((message.data or {}).get("traceparent"))
    if carried is None or not message.thread or message.type != "ask":
        return None
    # A foreman's ask is a step, whose span its seq names; any other (the run's ticket, an
    # ask of the operator's own) hangs under the span its traceparent names.
    parent = step_span_id(message.thread, message.seq) if message.from_ == FOREMAN else carried[1]
    return carried[0], child_span_id(parent, f"handle {nick} {message.seq}"), parent


def handled_traceparent(message: Message, nick: str) -> str | None:
    """The W3C traceparent a command handler is given (`TRACEPARENT`), naming the lurker's
    `handle NICK` span, so the spans the program makes itself hang under it."""
    ids = handled_ids(message, nick)
    return f"00-{ids[0]}-{ids[1]}-01" if ids else None


def handled_span(
    message: Message, nick: str, start_ns: int, outcome: str, error: str | None
) -> SpanRecord | None:
    """A lurker's work on one ask, under the ask's step span; None when the ask carries no
    trace context (it is no traced run's step)."""
    data = message.data or {}
    ids = handled_ids(message, nick)
    if ids is None:
        return None
    trace, span, parent = ids
    thread = message.thread or ""  # (handled_ids names no span for a line with no thread)
    return SpanRecord(
        f"handle {nick}",
        trace,
        span,
        parent,
        start_ns,
        max(start_ns, time.time_ns()),
        error=error,
        attributes={
            "bullpen.thread": thread,
            "bullpen.nick": nick,
            "bullpen.room.seq": message.seq,
            "bullpen.step.key": str(data.get("key", "")),
            "bullpen.outcome": outcome,
            "openinference.span.kind": "CHAIN",
            "session.id": thread,
        },
    )


def _line(message: Message) -> dict[str, Any]:
    return message.model_dump(mode="json", by_alias=True)


class ForemanSpans:
    """What the foreman exports as a run goes: each step's span once, when it is answered
    or overdue, and the run's root span with its final report."""

    def __init__(
        self, exporter: SpanSink, nick: str, trusted: frozenset[str], content: bool, screen: Any
    ) -> None:
        self.exporter, self.nick, self.trusted = exporter, nick, trusted
        self.content, self.screen = content, screen
        self.sent: dict[str, set[str]] = {}  # thread → span ids sent from this process
        self.lengths: dict[str, int] = {}  # thread → how many of its lines were looked at

    def see(self, thread: str, messages: list[Message], posts: list[OutPost]) -> None:
        """The thread as the foreman decided on it, and what it is about to post (its final
        report ends the run's span now)."""
        ending = any(p.type == "reply" and (p.data or {}).get("final") for p in posts)
        seen, self.lengths[thread] = self.lengths.get(thread, 0), len(messages)
        fresh = messages[seen:] if seen <= len(messages) else messages  # else: read anew
        if not ending and not any(m.type == "reply" for m in fresh):
            return  # no step ended since the last look: nothing new to send
        lines = [_line(m) for m in messages]
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        last = max((m.seq for m in messages), default=0)
        for post in posts:  # not in the room yet: its seq and id are the hub's to give
            if post.type == "reply" and (post.data or {}).get("final"):
                lines.append(
                    {"seq": last + 1, "id": "final-report", "from": self.nick, "to": post.to,
                     "type": "reply", "body": post.body, "data": post.data, "thread": thread,
                     "ts": stamp, "verified": True, "in_reply_to": post.in_reply_to}
                )  # fmt: skip
        spans = run_spans(lines, [], self.trusted, content=self.content, screen=self.screen)
        sent = self.sent.setdefault(thread, set())
        for span in spans:
            a = span.attributes
            if span.span_id in sent:
                continue
            step_done = "bullpen.step.key" in a and a.get("bullpen.step.state") != "asked"
            if step_done or a.get("bullpen.run.state") in ENDED:
                sent.add(span.span_id)
                self.exporter.submit(span)
        while len(self.sent) > THREADS:  # the oldest runs' memory goes first
            oldest = next(iter(self.sent))
            self.sent.pop(oldest)
            self.lengths.pop(oldest, None)

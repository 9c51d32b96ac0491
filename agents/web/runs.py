"""Pipeline runs, read back from their threads: each step asked, answered, failed or overdue.

A run is a thread that opens with an ask to the foreman; its steps are the
foreman's asks (each carries its `key`), a step's answer is the reply from
the nick that was asked to that ask's id, an overdue step is the foreman's
`[STEP TIMEOUT …]` report naming its key. Only verified lines from trusted
nicks count, as for the foreman itself (agents/foreman/pipeline.py).

A build run's grinder replies carry `{"kind": "grind-iteration", "tier",
"iteration", "passing", "total"}` and its final report `{"kind":
"build-report", "green", …}`: the tier climb is charted from those. A
backpass run's final report carries its funnel.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agents.foreman.pipeline import KEY

FOREMAN = "foreman"


def _when(ts: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def span(start: Any, end: Any) -> float | None:
    """Seconds between two room timestamps, or None when either is missing."""
    a, b = _when(start), _when(end)
    return None if a is None or b is None else max(0.0, b - a)


@dataclass
class Step:
    key: str
    nick: str
    body: str
    ask: dict[str, Any]
    reply: dict[str, Any] | None = None
    overdue: dict[str, Any] | None = None

    @property
    def state(self) -> str:
        if self.reply is not None:
            return "failed" if (self.reply.get("data") or {}).get("failed") else "answered"
        return "overdue" if self.overdue is not None else "asked"

    @property
    def seat(self) -> str | None:
        seat = (self.reply or {}).get("data", {}) or {}
        return str(seat["seat"]) if seat.get("seat") else None

    @property
    def flags(self) -> list[str]:
        data = (self.reply or {}).get("data") or {}
        flags = [str(f) for f in data.get("flags") or [] if isinstance(f, str)]
        if data.get("fallback_used"):
            flags.append("fallback seat")
        if data.get("failed"):
            first = str((self.reply or {}).get("body", "")).strip().splitlines()
            flags.append(first[0][:200] if first else "failed")
        return flags

    @property
    def duration(self) -> float | None:
        return span(self.ask.get("ts"), self.reply.get("ts")) if self.reply else None


@dataclass
class RunView:
    thread: str
    start: dict[str, Any]
    steps: list[Step] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)  # the operator's replies
    iterations: list[dict[str, Any]] = field(default_factory=list)
    last_ts: Any = None
    forks: list[str] = field(default_factory=list)  # threads forked from this run

    @property
    def forked_from(self) -> tuple[str, int] | None:
        """(parent thread, seq of the forked step's ask) for a fork (docs/replay.md)."""
        value = (self.start.get("data") or {}).get("forked_from")
        if not isinstance(value, str) or "@" not in value:
            return None
        parent, _, seq = value.rpartition("@")
        return (parent, int(seq)) if parent and seq.isdigit() else None

    @property
    def pipeline(self) -> str:
        return str((self.start.get("data") or {}).get("pipeline") or "run")

    @property
    def final(self) -> dict[str, Any] | None:
        return next((r for r in self.reports if (r.get("data") or {}).get("final")), None)

    def waiting_report(self) -> dict[str, Any] | None:
        """The newest Dig Report, when no answer to it is in the thread yet."""
        if self.final is not None:
            return None
        digs = [
            r
            for r in self.reports
            if str((r.get("data") or {}).get(KEY, "")).startswith("dig-report")
        ]
        if not digs:
            return None
        last = digs[-1]
        answered = any(a.get("in_reply_to") == last.get("id") for a in self.answers)
        return None if answered else last

    @property
    def state(self) -> str:
        final = self.final
        if final is not None:
            data = final.get("data") or {}
            if data.get("cancelled"):
                return "cancelled"
            bad = data.get("failed") or data.get("ok") is False or data.get("green") is False
            return "failed" if bad or data.get("outcome") == "failed" else "done"
        if self.waiting_report() is not None:
            return "waiting"
        return "open"

    @property
    def duration(self) -> float | None:
        return span(self.start.get("ts"), self.last_ts)

    @property
    def funnel(self) -> dict[str, Any] | None:
        final = self.final
        funnel = (final or {}).get("data", {}).get("funnel") if final else None
        return funnel if isinstance(funnel, dict) else None

    @property
    def build_report(self) -> dict[str, Any] | None:
        for report in reversed(self.reports):
            data = report.get("data") or {}
            if data.get("kind") == "build-report":
                return data
        return None


def build_runs(
    threads: dict[str, list[dict[str, Any]]], trusted: Iterable[str], foreman: str = FOREMAN
) -> list[RunView]:
    """Every run in the room, open ones first, newest first within each."""
    trusted = frozenset(trusted)
    runs = [
        run for lines in threads.values() if (run := build_run(lines, trusted, foreman)) is not None
    ]
    runs.sort(key=lambda r: (r.state not in ("open", "waiting"), -int(r.start.get("seq", 0))))
    by_thread = {run.thread: run for run in runs}
    for run in runs:
        parent = by_thread.get((run.forked_from or ("", 0))[0])
        if parent is not None:
            parent.forks.append(run.thread)
    return runs


def build_run(
    lines: list[dict[str, Any]], trusted: frozenset[str], foreman: str = FOREMAN
) -> RunView | None:
    counted = [m for m in lines if m.get("verified") is True and m.get("from") in trusted]
    start = next(
        (
            m
            for m in counted
            if m.get("type") == "ask" and m.get("to") == f"@{foreman}" and m.get("from") != foreman
        ),
        None,
    )
    if start is None or start.get("data") == {"ping": True}:  # a trust check's ping, not a run
        return None
    run = RunView(str(start.get("thread")), start, last_ts=counted[-1].get("ts"))
    operator = start.get("from")
    by_id: dict[str, Step] = {}
    for message in counted:
        data = message.get("data") or {}
        sender, kind = message.get("from"), message.get("type")
        if sender == foreman and kind == "ask" and KEY in data:
            step = Step(
                str(data[KEY]),
                str(message.get("to", "")).removeprefix("@"),
                str(message.get("body", "")),
                message,
            )
            by_id[str(message.get("id"))] = step
            run.steps.append(step)
        elif sender == foreman and kind == "reply" and message.get("to") == f"@{operator}":
            run.reports.append(message)
            overdue = data.get("overdue")
            for step in run.steps:
                if step.key == overdue:
                    step.overdue = message
        elif sender == operator and kind == "reply" and message.get("to") == f"@{foreman}":
            run.answers.append(message)
        if data.get("kind") == "grind-iteration":
            run.iterations.append(data)
        asked = by_id.get(str(message.get("in_reply_to") or ""))
        if asked is not None and kind == "reply" and sender == asked.nick and asked.reply is None:
            asked.reply = message
    return run

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

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from agents.foreman.pipeline import KEY, Run
from agents.seats.tally import judgments_of
from room.message import Message, bare

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
    def title(self) -> str:
        """What the run is about: its title (an expedition's), else its ask's first line."""
        data = self.start.get("data") or {}
        title = data.get("title") if isinstance(data.get("title"), str) else None
        lines = str(self.start.get("body", "")).strip().splitlines()
        return (title or (lines[0] if lines else "")).strip()[:80]

    @property
    def operator(self) -> str:
        return str(self.start.get("from", ""))

    @property
    def failed_step(self) -> tuple[int, Step] | None:
        """(its number, counting from 1, and the step) of the first step that failed."""
        return next(((n, s) for n, s in enumerate(self.steps, 1) if s.state == "failed"), None)

    @property
    def waits_on(self) -> str | None:
        """Whom the run waits on now (a nick, without @), or None when it is over."""
        if self.final is not None:
            return None
        if self.waiting_report() is not None:
            return self.operator
        pending = [s for s in self.steps if s.reply is None]
        return pending[0].nick if pending else FOREMAN

    @property
    def where(self) -> str:
        """The run's state in one line: the same words on the web page and in `bullpen runs`."""
        state = self.state
        if state == "cancelled":
            return "cancelled"
        if state in ("done", "failed"):
            failed = self.failed_step
            if state == "failed" and failed is not None:
                n, step = failed
                return f"failed at step {n} ({step.key}, @{step.nick})"
            return state
        if state == "waiting":
            return f"at the gate: waiting on @{self.operator}"
        pending = [s for s in self.steps if s.reply is None]
        overdue = [s for s in pending if s.overdue is not None]
        if overdue:
            return "overdue: " + ", ".join(f"@{s.nick} ({s.key})" for s in overdue)
        if pending:
            nicks = sorted({s.nick for s in pending})
            return f"waiting on {', '.join('@' + n for n in nicks)} ({len(pending)} step(s))"
        return f"waiting on @{FOREMAN}"

    @property
    def calls(self) -> int:
        """Model calls so far: the attempts each answered step's judgments name."""
        return sum(
            int(j.get("attempts") or 1)
            for step in self.steps
            for j in judgments_of((step.reply or {}).get("data") or {})
        )

    @property
    def tokens(self) -> int | None:
        """Tokens the servers counted so far, or None when no call reported any (the local
        and cmd seats count none): never an estimate."""
        counted = [
            int(j["tokens"])
            for step in self.steps
            for j in judgments_of((step.reply or {}).get("data") or {})
            if isinstance(j.get("tokens"), int)
        ]
        return sum(counted) if counted else None

    def summary(self) -> dict[str, Any]:
        """The run as `bullpen runs --json` prints it (docs/operating.md names each field)."""
        failed = self.failed_step
        return {
            "thread": self.thread,
            "kind": self.pipeline,
            "title": self.title,
            "state": self.state,
            "where": self.where,
            "waits_on": self.waits_on,
            "failed_step": failed[0] if failed else None,
            "started": self.start.get("ts"),
            "last_activity": self.last_ts,
            "steps": len(self.steps),
            "calls": self.calls,
            "tokens": self.tokens,
            "forked_from": self.forked_from[0] if self.forked_from else None,
        }

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
    """One run from its thread's lines, rebuilt by the foreman's own Run (which lines count,
    which ask opened the run, which reply answers which step), so this view, `bullpen runs`
    and the foreman never disagree about a run's state."""
    messages = []
    for line in lines:
        try:
            messages.append(Message.model_validate(line))
        except ValidationError:
            continue  # not a room line: nothing a run can be rebuilt from
    try:
        run = Run(messages, foreman=foreman, trusted=trusted, now=time.time())
    except ValueError:
        return None  # no verified ask to the foreman: a conversation, not a run
    start = run.start.to_dict()
    if start.get("data") == {"ping": True}:  # a trust check's ping, not a run
        return None
    view = RunView(run.thread, start, last_ts=run.messages[-1].ts)
    for key, ask, reply in run.steps():
        view.steps.append(
            Step(key, bare(ask.to), ask.body, ask.to_dict(), reply.to_dict() if reply else None)
        )
    by_key = {step.key: step for step in view.steps}
    for message in run.messages:
        data = message.data or {}
        line = message.to_dict()
        if (
            message.from_ == foreman
            and message.type == "reply"
            and bare(message.to) == run.operator
        ):
            view.reports.append(line)
            overdue = by_key.get(str(data.get("overdue")))
            if overdue is not None:
                overdue.overdue = line
        elif (
            message.from_ == run.operator
            and message.type == "reply"
            and bare(message.to) == foreman
        ):
            view.answers.append(line)
        if data.get("kind") == "grind-iteration":
            view.iterations.append(data)
    return view

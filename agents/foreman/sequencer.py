"""The foreman: a deterministic sequencer that lives in the room.

It is a lurker that also wakes on replies. On every wake it reads what is new
in the run's thread from the hub (only verified lines from trusted nicks, from
the last seq it saw: agents/foreman/seen.py), rebuilds the Run, asks the
pipeline what is due, and posts the asks and reports whose keys are not yet in
the thread, keeping at most the pipeline's bound of asks awaiting replies. It
reads without holding its lock, then merges and decides under it, so a slow
read of one thread never holds up another run. It opens no file: its whole
memory is the thread (a test proves it with an audit hook).

A periodic tick reports overdue steps to the run's operator, as
`[STEP TIMEOUT — @nick did not reply in N s]`, instead of waiting forever.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

import structlog

from agents.foreman.pipeline import KEY, Action, Ask, Report, Run
from agents.foreman.registry import PipelineRegistry
from agents.foreman.seen import Seen, SeenThreads
from agents.runtime import cancel
from agents.runtime.budget import step_budget
from agents.runtime.outcome import Failure, Outbox, OutPost
from agents.runtime.step import StepContext
from agents.runtime.wake import is_ping
from room.errors import ConfigError, HubUnavailable
from room.message import Message, bare

log = structlog.get_logger("agents.foreman")

OVERDUE_GRACE_S = 10.0
RECENT_WINDOW = 10_000
# What a run's ticket carries that every one of its step asks carries too: the trace context
# (a W3C traceparent naming the run's span: agents/telemetry/process.py) and the run's own
# budget (`--budget`, held by the gateway: agents/gateway/runbudgets.py).
CARRIED = ("traceparent", "budget")


def overdue_key(key: str) -> str:
    return f"overdue/{key}"


def _epoch(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def pipeline_name(start: Message) -> str:
    named = (start.data or {}).get("pipeline")
    if isinstance(named, str):
        return named
    return start.body.split(maxsplit=1)[0].lower() if start.body.strip() else ""


def _failed(key: str, reason: str) -> Report:
    return Report(key, f"[FOREMAN FAILED — {reason}]", {"failed": True}, final=True)


def _ended(run: Run) -> list[Action]:
    """A refusal, in the room, of each answer the operator sent after the run ended: a late
    `confirm` typed at a prompt the run no longer waits at is not acted on, and is told so."""
    final = run.final_report()
    if final is None:
        return []
    how = "cancelled" if (final.data or {}).get(cancel.CANCELLED_KEY) else "over"
    return [
        Report(
            f"ended/{late.id}",
            f"[RUN ENDED — the run {run.thread} is {how} (seq {final.seq}): this reply was not "
            "acted on; start a new run]",
            {"refused": True, "ended": how},
            in_reply_to=late.id,
        )
        for late in run.operator_replies()
        if late.seq > final.seq
    ]


class Foreman:
    """The foreman as a lurker handler: `__call__` on a wake, `tick` on a timer."""

    wakes_on_replies = True  # a lurker running it without wake_replies refuses to start

    def __init__(self) -> None:
        self._lock = asyncio.Lock()  # merge and decide one wake at a time; never held to read
        self._open: set[str] = set()
        self._seen = SeenThreads()
        self._bootstrapped = False
        self._registry: PipelineRegistry | None = None
        self._spans: Any = None  # a ForemanSpans when this process exports traces

    def prepare(self, ctx: StepContext) -> None:
        """Load every registered pipeline when the lurker starts, and let each check its own
        section: a broken `[pipelines]` entry or a misspelt `[backpass]` key stops the foreman
        at once (exit 78), and a wake imports nothing (it opens no file)."""
        from agents.telemetry.live import installed

        exporter = installed()
        if exporter is not None:
            from agents.telemetry.config import TelemetryConfig
            from agents.telemetry.process import ForemanSpans

            content = TelemetryConfig.of(ctx.home).capture_content
            trusted = frozenset(ctx.home.trust.trusted)
            self._spans = ForemanSpans(exporter, ctx.nick, trusted, content, ctx.home.screen)
        registry = self.registry(ctx)
        for name in registry.names():
            check = getattr(registry.get(name), "check", None)
            if callable(check):  # a pipeline checks its own society.toml section
                check(ctx.home)

    def registry(self, ctx: StepContext) -> PipelineRegistry:
        """The built-in pipelines and this home's `[pipelines]`, one registry per process."""
        if self._registry is None:
            self._registry = PipelineRegistry(ctx.home.society.pipelines)
        return self._registry

    async def __call__(self, message: Message, ctx: StepContext) -> Outbox | Failure:
        if not message.thread:
            if message.type == "ask":
                return Failure("an ask to the foreman needs a thread: the run's id")
            return Outbox()
        return await self._advance(message.thread, message.seq, ctx)

    async def _advance(self, thread: str, through: int, ctx: StepContext) -> Outbox | Failure:
        """Read what is new (no lock held), then merge and decide under the lock."""
        while True:
            after = self._seen.after(thread)
            fresh, last = await self._read(ctx, thread, after, through)
            async with self._lock:
                seen = self._seen.get(thread, self._open)
                if seen.merge(after, fresh, last):  # else the cache was dropped: read again
                    return self.decide(seen, ctx, time.time())

    async def _read(
        self, ctx: StepContext, thread: str, after: int, through: int
    ) -> tuple[list[Message], int]:
        if ctx.read_trusted is not None:
            return await ctx.read_trusted(thread, after, through)
        messages = await ctx.read_thread(thread, through)  # a context without the filter
        return messages, max([after, through, *(m.seq for m in messages)])

    def decide(self, seen: Seen, ctx: StepContext, now: float) -> Outbox | Failure:
        """What to post now, given the thread so far. Pure but for the open-runs cache (and,
        when this process exports traces, the spans of the steps answered so far)."""
        decided = self._decide(seen, ctx, now)
        if self._spans is not None and seen.messages and isinstance(decided, Outbox):
            thread = seen.messages[0].thread or ""
            self._spans.see(thread, seen.messages, decided.posts)
        return decided

    def _decide(self, seen: Seen, ctx: StepContext, now: float) -> Outbox | Failure:
        try:
            run = Run(seen.messages, foreman=ctx.nick, trusted=ctx.home.trust.trusted, now=now)
        except ValueError:
            return Outbox()
        if is_ping(run.start):  # the lurker answered it itself; it is no run
            return Outbox()
        name = pipeline_name(run.start)
        registry = self.registry(ctx)
        try:
            pipeline = registry.get(name)
        except ConfigError as exc:
            return Outbox(self._posts(run, seen, [_failed("broken-pipeline", exc.message)], 0))
        if pipeline is None:
            known = ", ".join(registry.names())
            reason = f"unknown pipeline {name!r}; known: {known}"
            return Outbox(self._posts(run, seen, [_failed("unknown-pipeline", reason)], 0))
        if run.finished:
            self._open.discard(run.thread)
            return Outbox(self._posts(run, seen, _ended(run), 0))
        stop = run.cancellation
        if stop is not None:
            self._open.discard(run.thread)
            return Outbox(self._cancelled(run, seen, stop))
        actions = pipeline.advance(run)
        posts = self._posts(run, seen, actions, pipeline.in_flight_limit(run))
        if any(isinstance(a, Report) and a.final for a in actions):
            self._open.discard(run.thread)
        else:
            self._open.add(run.thread)
        return Outbox(posts)

    def _posts(
        self, run: Run, seen: Seen, actions: list[Ask | Report], limit: int
    ) -> list[OutPost]:
        """The actions whose keys are neither in the thread nor decided already; the ones
        returned are claimed, so a decision before they land does not post them again."""
        posted = run.keys
        start = run.start.data or {}
        unposted = seen.unposted(posted, time.monotonic())
        in_flight = len(run.pending()) + sum(unposted.values())
        keys = posted | set(unposted)
        posts = []
        for action in actions:
            if action.key in keys:
                continue
            keys.add(action.key)
            if isinstance(action, Ask):
                if in_flight >= limit:
                    continue
                in_flight += 1
                seen.claim(action.key, ask=True)
                carried = {k: start[k] for k in CARRIED if k in start}
                data = {**carried, **action.data, KEY: action.key}
                if action.timeout_s is not None:
                    data["overdue_s"] = action.timeout_s
                posts.append(OutPost(f"@{action.to}", action.body, "ask", data, None, run.thread))
            else:
                seen.claim(action.key, ask=False)
                data = {**action.data, KEY: action.key, "final": action.final}
                target = action.in_reply_to or run.start.id
                posts.append(
                    OutPost(f"@{run.operator}", action.body, "reply", data, target, run.thread)
                )
        return posts

    def _cancelled(self, run: Run, seen: Seen, stop: Message) -> list[OutPost]:
        """The run's final report, CANCELLED, and a notice to each step still working on it."""
        reason = cancel.reason_of(stop)
        report = Report(
            cancel.CANCELLED_KEY,
            cancel.cancelled_body(reason),
            {cancel.CANCELLED_KEY: True, "reason": reason, "outcome": "cancelled"},
            final=True,
            in_reply_to=stop.id,
        )
        posts = self._posts(run, seen, [report], 0)
        if not posts:  # decided already, not yet in the thread: nothing more to send
            return []
        for ask in run.pending():
            posts.append(
                OutPost(
                    ask.to,
                    f"the run {run.thread} was cancelled: stop this step ({reason})",
                    "chat",
                    cancel.step_notice_data(ask.id, reason),
                    ask.id,
                    run.thread,
                )
            )
        return posts

    async def tick(self, ctx: StepContext) -> Outbox:
        """Report every overdue step in an open run, then advance the run: a pipeline may
        route around a step that will never answer (a dead lurker never wakes us)."""
        if not self._bootstrapped:
            await self._bootstrap(ctx)
        posts: list[OutPost] = []
        for thread in sorted(self._open):
            after = self._seen.after(thread)
            try:
                fresh, last = await self._read(ctx, thread, after, 0)
            except HubUnavailable as exc:  # the others still move on; this one next tick
                log.warning("could not read an open run", thread=thread, error=exc.message)
                continue
            async with self._lock:
                seen = self._seen.get(thread, self._open)
                if not seen.merge(after, fresh, last):
                    continue  # the cache was dropped meanwhile: the next tick reads it again
                now = time.time()
                posts += self.overdue(seen, ctx, now)
                advanced = self.decide(seen, ctx, now)
            if isinstance(advanced, Outbox):
                posts += advanced.posts
        return Outbox(posts)

    def overdue(self, seen: Seen, ctx: StepContext, now: float) -> list[OutPost]:
        try:
            run = Run(seen.messages, foreman=ctx.nick, trusted=ctx.home.trust.trusted, now=now)
        except ValueError:
            return []
        if run.finished:
            self._open.discard(run.thread)
            return []
        reports = []
        for ask in run.pending():
            data = ask.data or {}
            key = str(data.get(KEY))
            nick = bare(ask.to)
            limit = data.get("overdue_s")
            if not isinstance(limit, int | float):
                nick_config = ctx.home.society.nicks.get(nick)
                budget = step_budget(ctx.home.society, nick_config) if nick_config else 120.0
                limit = budget + OVERDUE_GRACE_S  # the lurker's own (agents/runtime/budget.py)
            waited = now - _epoch(ask.ts)
            if waited > limit:
                body = f"[STEP TIMEOUT — @{nick} did not reply in {int(limit)} s]"
                reports.append(Report(overdue_key(key), body, {"overdue": key, "nick": nick}))
        return self._posts(run, seen, list(reports), 0)

    async def _bootstrap(self, ctx: StepContext) -> None:
        """After a restart, find the runs still open from the asks addressed to us."""
        self._bootstrapped = True
        if ctx.read_to is None:  # a context with no room behind it: no run to find
            return
        recent = await ctx.read_to(ctx.nick, RECENT_WINDOW)
        for message in recent:
            opens_a_run = message.type == "ask" and not is_ping(message)
            if opens_a_run and message.thread and message.verified:
                self._open.add(message.thread)
        log.info("looked for open runs", threads=len(self._open))


handle = Foreman()

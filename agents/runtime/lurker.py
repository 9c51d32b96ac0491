"""`bullpen lurk NICK`: one nick's tail loop.

It follows the room (the local file when it is here, else the hub), acts on
a message only when all five wake rules hold (agents.runtime.wake), runs the nick's
handler, and posts the reply through the hub with its own proof. Its cursor
is saved after each handled message; on restart it first collects the ids
it already answered after that cursor, so a crash between replying and
saving never produces a second reply. A read failure backs off and retries
without touching the cursor; a room shorter than the cursor stops it with
an error that says what happened. A post the hub refuses (401/403) keeps
its message before the cursor and is retried with the proof read again,
then reported (agents/runtime/refused.py): never dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import structlog

from agents.home import Home
from agents.runtime import budget, handlers, nicklock
from agents.runtime.cancel import is_cancel
from agents.runtime.cursor import Cursor
from agents.runtime.outcome import Failure, Outbox, Outcome, OutPost, screened
from agents.runtime.ping import pong_identity
from agents.runtime.refused import Refusal, Refusals, is_refusal, lurker_client
from agents.runtime.services import StepServices
from agents.runtime.step import Reply, StepContext
from agents.runtime.stepcancel import CancellableSteps
from agents.runtime.wake import is_ping, orchestrator_problem, refusal, wake_set
from agents.telemetry import live
from room import logs
from room.client import RoomClient, read_file
from room.durable import durable_end
from room.errors import ConfigError, CursorAhead, HubUnavailable, PostRejected
from room.log import Filter
from room.message import Message
from room.reader import RoomFile
from room.stopsignals import StopSignals
from room.tail import FileFollower, HubFollower, Position, WatchUnavailable
from room.version import __version__

if TYPE_CHECKING:
    from agents.memory.lessons import LessonReader

EXIT_OK, EXIT_ERROR, EXIT_CONFIG = 0, 1, 78
MAX_BACKOFF_S = 10.0


def failure_body(nick: str, reason: str) -> str:
    return f"[{nick} FAILED — {reason}]"


class Lurker:
    def __init__(self, home: Home, nick: str, lock: int | None = None) -> None:
        society = home.society
        if nick not in society.nicks:
            known = ", ".join(sorted(society.nicks)) or "none"
            raise ConfigError(
                f"{nick} has no [nicks.{nick}] table in {home.society_file} (configured: {known})"
            )
        self.home = home
        self.nick = nick
        self.config = budget.with_budget(society, society.nicks[nick])  # seats' time budgets
        self.state = home.state_dir(nick)
        self.state.mkdir(parents=True, exist_ok=True)
        # `lock`: the nick's lock, already taken by a lone lurker's idle loop (lean.py).
        self._lock = lock if lock is not None else nicklock.take(home.home_state_dir(nick), nick)
        self.wake = wake_set(self.config.wake_replies or home.wake_replies_flagged(nick))
        self.trusted = home.trust.trusted
        self.telemetry = live.install(home, f"lurker {nick}")  # None: [telemetry] is off
        # Its module is loaded on the first wake unless it works before one (handlers.eager).
        self.handler = handlers.load(self.config, wakes_on_replies="reply" in self.wake)
        problem = orchestrator_problem(nick, self.handler.needs_replies(), self.wake)
        if problem is not None:
            raise ConfigError(problem)
        self.cursor = Cursor(self.state / "cursor")
        self.log = structlog.get_logger("agents.runtime.lurker").bind(nick=nick)
        self.client: RoomClient = lurker_client(home, nick, self.config.relaxed, self.log)
        self.steps = CancellableSteps(nick, self.client, self.trusted, self.log)
        self.answered: set[str] = set()
        self._stop = asyncio.Event()
        self._slots = asyncio.Semaphore(self.config.concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending: dict[int, Position] = {}
        self._last = Position(0)
        self.refusals = Refusals(home, nick, self.config.relaxed, self.client, self.log, self.state)
        self.services = StepServices(home, nick, self.config, self.client, self.trusted)
        self.ctx = StepContext(
            nick=nick,
            home=home,
            options=dict(self.config.options),
            judge=self.services.judge,
            read_thread=self.services.read_thread,
            read_to=self.services.read_to,
            read_trusted=self.services.read_trusted,
        )
        self.handler.prepare(self.ctx)
        self._lessons: LessonReader | None = None

    @property
    def lessons(self) -> LessonReader:
        """The nick's memory recall, opened on the first wake that needs it: an idle lurker
        does not load the memory index (docs/performance.md, "The society's footprint")."""
        if self._lessons is None:
            from agents.memory.lessons import LessonReader

            self._lessons = LessonReader(self.home, self.nick)
        return self._lessons

    def stop(self) -> None:  # the loop, from here on
        self._stop.set()

    def _source_name(self) -> str:
        stream = self.home.society.room.engine != "jsonl"
        return "stream" if stream else ("file" if self.reads_file() else "hub")

    def reads_file(self) -> bool:
        """Read the room file here? Never when the room is a stream: a file left beside it
        (say, after `bullpen import`) is not the room."""
        if self.home.society.room.engine != "jsonl":
            return False
        mode = self.config.read
        return mode == "file" or (mode == "auto" and self.home.room_path.parent.is_dir())

    def _saved_position(self) -> Position | None:
        """This nick's cursor; a lurker moved between `bullpen up` and systemd takes over
        the cursor it left in the other place, rather than starting at the end."""
        saved = self.cursor.load()
        if saved is not None:
            return saved
        for other in self.home.state_dirs(self.nick)[1:]:
            inherited = Cursor(other / "cursor").load()
            if inherited is not None:
                self.log.info("taking over the cursor", source=str(other), seq=inherited.seq)
                self.cursor.save(inherited)
                return inherited
        return None

    async def start_position(self) -> Position:
        saved = self._saved_position()
        if saved is not None:
            if not self.reads_file():  # the file followers check this themselves, at once
                head = int((await self.client.health())["seq"])
                if saved.seq > head:
                    raise CursorAhead(
                        f"the hub's room ends at seq {head}, but {self.nick}'s cursor "
                        f"({self.cursor.path}) is at seq {saved.seq}: the room was truncated "
                        "or replaced. Restore the room from its backup, or delete the cursor "
                        "if the room was deliberately started over"
                    )
            return saved
        if self.reads_file() and self.home.room_path.exists():
            with RoomFile(self.home.room_path) as room:  # its durable end: a line not yet
                head = room.last_seq(durable_end(room.path, room.size()))  # fsynced may go
        else:
            head = int((await self.client.health())["seq"])
        self.log.info("no cursor yet: starting at the end of the room", seq=head)
        start = Position(head)
        self.cursor.save(start)
        return start

    async def _collect_answered(self, after: int) -> None:
        """Ids this nick already replied to after its cursor: never answer them again."""
        if self.reads_file() and self.home.room_path.exists():
            mine, _ = read_file(self.home.room_path, after, None, Filter(sender=self.nick))
        else:
            mine, cursor = [], after
            while True:
                lines, last = await self.client.read(cursor, 1000, sender=self.nick)
                mine += lines
                if len(lines) < 1000:
                    break
                cursor = last
        self.answered.update(m["in_reply_to"] for m in mine if m.get("in_reply_to"))

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        signals = StopSignals()  # SIGTERM (systemd) ends with 0, Ctrl-C with 130
        signals.install(loop, self.stop)
        ticker = None
        try:
            with contextlib.suppress(HubUnavailable):
                # The client's first request pays for lazy imports and the connection;
                # pay it now, not in the first reply.
                await self.client.health()
            start = await self._retrying(self.start_position)
            await self._retrying(lambda: self._collect_answered(start.seq))
            self._last = start
            self.log.info(
                "lurking",
                wake=sorted(self.wake),
                source=self._source_name(),
                after=start.seq,
                version=__version__,
            )
            tick = self.handler.tick()
            if tick is not None:
                ticker = asyncio.create_task(self._tick_loop(tick))
            await self._follow(start)
            return signals.exit_code(EXIT_OK)
        except CursorAhead as exc:
            # Exit 78: restarting cannot help until a person restores the room or the cursor.
            self.log.error("room is shorter than the cursor; stopping", error=exc.message)
            print(f"bullpen lurk {self.nick}: {exc.message}", file=sys.stderr)
            return EXIT_CONFIG
        finally:
            if ticker is not None:
                ticker.cancel()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.client.aclose()
            await live.closed(self.telemetry)  # what is queued goes out before it ends
            self.log.info("stopped", cursor=self._safe().seq)

    async def _retrying(self, action: Any) -> Any:
        delay = 0.2
        while True:
            try:
                return await action()
            except HubUnavailable as exc:
                if self._stop.is_set():
                    raise asyncio.CancelledError from None
                self.log.warning("hub unreachable; retrying", error=exc.message, retry_in_s=delay)
                await self._sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)

    async def _sleep(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def _follow(self, start: Position) -> None:
        use_file = self.reads_file()
        while not self._stop.is_set():
            source: AsyncIterator[tuple[Message, Position]]
            if self.home.society.room.engine == "jetstream":
                from room.jetstream.follow import StreamFollower
                from room.jetstream.stream import StreamSettings

                room = self.home.society.room
                source = StreamFollower(  # its durable consumer is the cursor (docs/scaling.md)
                    StreamSettings.from_options(room.engine_options(self.home.path)),
                    self.nick,
                    self._safe(),
                    progress=lambda: self._safe().seq,
                    on_resume=self._collect_answered,
                    ack_wait_s=max(60.0, 2 * self.config.timeout_s + 30),
                ).follow()
            elif use_file:
                source = FileFollower(
                    self.home.room_path,
                    self._safe(),
                    safety_s=self.home.society.lurker.safety_reread_s,
                    to=f"@{self.nick}",
                ).follow()
            else:
                source = HubFollower(self.client, self._safe(), to=f"@{self.nick}").follow()
            consume = asyncio.create_task(self._consume(source))
            stopped = asyncio.create_task(self._stop.wait())
            await asyncio.wait([consume, stopped], return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if not consume.done():
                consume.cancel()  # interrupts a blocked wait or long-poll at once
                await asyncio.gather(consume, return_exceptions=True)
                return
            try:
                consume.result()
            except WatchUnavailable as exc:
                self.log.warning(
                    "cannot watch the room file; long-polling the hub instead", error=str(exc)
                )
                use_file = False
                continue
            await self._sleep(1.0)  # the follower ended unexpectedly: begin again shortly

    async def _consume(self, source: AsyncIterator[tuple[Message, Position]]) -> None:
        async for message, position in source:
            await self._consider(message, position)

    async def _consider(self, message: Message, position: Position) -> None:
        reason = refusal(message, self.nick, self.wake, self.trusted)
        if reason is not None:
            if message.addressed_to(self.nick):
                self.log.debug("not waking", seq=message.seq, why=reason)
            self._last = position
            return
        if message.seq in self._pending:  # redelivered while still being handled
            return
        if is_cancel(message):  # its run was cancelled: stop the step, never run the handler
            refused = self.steps.cancel(message)  # or say why not, if another nick sent it
            if refused is not None and message.id not in self.answered:
                await self._post(refused, message)
                self.answered.add(message.id)
            self._last = position
            return
        if message.id in self.answered:
            self.log.info("already answered; skipping", seq=message.seq, id=message.id)
            self._last = position
            return
        # Only once it is pending may the cursor pass it: a handler finishing while this
        # one waits for a slot must not save a cursor that skips it.
        await self._slots.acquire()
        self._pending[message.seq] = position
        self._last = position
        task = asyncio.create_task(self._handle(message, position))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _safe(self) -> Position:
        """The furthest position with nothing before it still being handled."""
        if not self._pending:
            return self._last
        return Position(min(self._pending) - 1)

    async def _handle(self, message: Message, position: Position) -> None:
        log = self.log.bind(seq=message.seq, id=message.id, sender=message.from_)
        stopping = False
        try:
            log.info("woken", type=message.type, thread=message.thread)
            started, started_ns = time.monotonic(), time.time_ns()
            if is_ping(message):
                outcome: Outcome = Reply(
                    "pong", {"pong": True, "nick": self.nick, **pong_identity(self.home)}
                )
            else:
                from agents.runtime import lessons as wake_lessons  # on the first wake

                ctx, told = wake_lessons.for_wake(self.ctx, self.lessons, message, log)
                outcome = await self.steps.run(
                    message, self.handler.run(message, ctx, self.config.timeout_s)
                )
                outcome = wake_lessons.named(outcome, told)
            handled_ms = round((time.monotonic() - started) * 1000, 2)
            await self._deliver(message, outcome)
            live.woke(self.telemetry, message, self.nick, started_ns, outcome)  # its span
            log.info(
                "handled",
                outcome=type(outcome).__name__.lower(),
                handler_ms=handled_ms,
                total_ms=round((time.monotonic() - started) * 1000, 2),
            )
        except asyncio.CancelledError:
            stopping = True
            raise
        except Exception:
            log.exception("could not deliver a reply")
        finally:
            if not stopping:  # stopped unanswered: it stays before the cursor, for a restart
                self._pending.pop(message.seq, None)
            self._slots.release()
        self.cursor.save(self._safe())

    async def _deliver(self, message: Message, outcome: Outcome) -> None:
        outcome = screened(outcome, self.home.screen, f"{self.nick}'s answer to {message.id}")
        if isinstance(outcome, Outbox):
            for post in outcome.posts:
                await self._post(post, None, message)
            return
        if isinstance(outcome, Failure):
            self.log.warning("handler failed", seq=message.seq, reason=outcome.reason)
            body = failure_body(self.nick, outcome.reason)
            if outcome.details.get("cancelled"):
                body = f"[{self.nick} CANCELLED — {outcome.reason}]"
            data: dict[str, Any] | None = {
                "failed": True,
                "reason": outcome.reason,
                "nick": self.nick,
                **outcome.details,
            }
        else:
            body, data = outcome.body, outcome.data
        reply = OutPost(
            to=f"@{message.from_}",
            body=body,
            type="reply",
            data=data,
            in_reply_to=message.id,
            thread=message.thread,
        )
        try:
            await self._post(reply, message)
        except PostRejected as exc:
            if isinstance(outcome, Failure):
                raise
            self.log.error("the hub rejected our reply", error=exc.message)
            await self._post(
                OutPost(
                    to=f"@{message.from_}",
                    body=failure_body(self.nick, f"the hub rejected the reply: {exc.message}"),
                    type="reply",
                    data={"failed": True, "reason": exc.message, "nick": self.nick},
                    in_reply_to=message.id,
                    thread=message.thread,
                ),
                message,
            )
        self.answered.add(message.id)

    async def _post(
        self, post: OutPost, answering: Message | None, cause: Message | None = None
    ) -> dict[str, Any]:
        """Post, waiting out a hub outage and a refused proof; never post a reply twice.

        A refusal (401/403) wrote nothing: the proof is read again and the
        post retried until it goes in or the lurker stops (agents/runtime/refused.py),
        so the message it answers (`cause`) is never passed unanswered.

        Every secret this process holds (its proof, a seat's API key) is
        scrubbed first, and what still holds secret material (trust/screen.py)
        is SecretFound: a model or a program may echo one back, and the room
        must never keep it.
        """
        self.home.screen.check_json(
            {"body": post.body, "data": post.data}, f"a post by {self.nick}"
        )
        built = self.client.build(
            post.to,
            logs.scrub(post.body),
            type=post.type,
            data=logs.scrub(post.data),
            in_reply_to=post.in_reply_to,
            thread=post.thread,
        )
        delay = 0.5
        cause = cause or answering
        refusal: Refusal | None = None
        while True:
            try:
                stored = await self.client.send(built)
                self.refusals.cleared(post, cause)
                return stored
            except PostRejected as exc:
                if exc.status == 429:  # over its nick's bound (room/limits.py): wait, post again
                    self.log.warning("over the hub's rate bound; retrying", error=exc.message)
                    if await self._sleep(delay):
                        raise asyncio.CancelledError from None
                    delay = min(delay * 2, MAX_BACKOFF_S)
                    continue
                if not is_refusal(exc):
                    raise
                refusal = refusal or Refusal(self.home.society.lurker)
                if await self._sleep(await self.refusals.refused(exc, refusal, post, cause)):
                    raise asyncio.CancelledError from None
            except HubUnavailable as exc:
                self.log.warning("hub unavailable while posting; retrying", error=exc.message)
                if await self._sleep(delay):
                    raise asyncio.CancelledError from None
                delay = min(delay * 2, MAX_BACKOFF_S)
                if answering is not None:
                    found = await self._find_reply(answering)
                    if found is not None:
                        return found

    async def _find_reply(self, message: Message) -> dict[str, Any] | None:
        try:
            lines, _ = await self.client.read(message.seq, 1000, sender=self.nick)
        except HubUnavailable:
            return None
        return next((m for m in lines if m.get("in_reply_to") == message.id), None)

    async def _tick_loop(self, tick: Any) -> None:
        interval = self.home.society.lurker.overdue_check_s
        while not await self._sleep(interval):
            try:
                outcome = await tick(self.ctx)
                if isinstance(outcome, Outbox):
                    for post in outcome.posts:
                        await self._post(post, None)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("periodic check failed")


def cmd_lurk(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    return serve(Lurker(home, args.nick))


def serve(lurker: Lurker) -> int:
    """Run a lurker to its end on uvloop (asyncio without it); its exit code."""
    try:
        import uvloop

        return uvloop.run(lurker.run())
    except ImportError:  # pragma: no cover
        return asyncio.run(lurker.run())

"""A lone lurker's idle loop on the standard library: `bullpen lurk NICK` started alone.

A lurker started on its own (its systemd unit) used to import everything a
wake needs before it read a line: pydantic and the config and message models,
httpx and the gateway client, structlog and rich: some 30 MB per process, paid
by every nick while it waits. Here the idle loop is only what waiting needs,
the tail (room/tail.py's RawFollower), the five wake rules on a line's raw
fields (agents.runtime.wake.certain_refusal) and the cursor, and the rest is
loaded on the first line that may wake it:

1. A child forked before anything heavy is imported runs every start check of
   the full lurker (society.toml, the handler's module, TRUST, the nick's lock,
   the cursor or the room's durable end) and sends back what the idle loop
   needs, or the error, which this process raises as the CLI would. The child
   exits; its imports go with it.
2. This process takes the nick's lock and follows the room file. A line not
   addressed to the nick is skipped on its bytes; one addressed to it is
   decoded and held to the wake rules it surely fails; a line that fails none
   (or looks unusual in any way) is handed over.
3. Hand-over: the cursor is saved just before that line, the full lurker
   (agents.runtime.lurker) is loaded, keeps the lock and starts from the
   cursor, so it judges that line with the full rules and answers it. From
   then on the process is the full lurker.

Only a local room file is followed this way; a room read from the hub or a
stream, and a handler that works before its first wake (a tick, a prepare:
the foreman, the librarian), start the full lurker at once. Under `bullpen up`
the lurkers, forked from a zygote that has imported the full lurker
(agents/runtime/zygote.py), take this path too: the child that checks is forked
from them, so what building the full lurker writes to the zygote's shared pages
(reference counts, the allocator) leaves with it, an idle lurker holds little
more than its idle loop (6 MB PSS, not 15: docs/performance.md) and its hand-over
imports nothing.

The price is the first wake's: loading the full lurker (about half a second of
CPU when started alone). BULLPEN_LEAN=off in a lurker's environment starts the
full lurker at once instead, for a nick whose first answer must not wait, or a
test that times a wake.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents.runtime import nicklock
from agents.runtime.cursor import Cursor
from agents.runtime.wake import certain_refusal
from room import strictjson
from room.errors import BullpenError, ConfigError, CursorAhead, UsageError
from room.stopsignals import StopSignals
from room.tail import Position, RawFollower, WatchUnavailable
from room.version import __version__

LEVELS = ("debug", "info", "warning", "error")
ERRORS: dict[str, type[BullpenError]] = {
    "ConfigError": ConfigError,
    "UsageError": UsageError,
    "BullpenError": BullpenError,
}
EXIT_CONFIG = 78
SWITCH = "BULLPEN_LEAN"  # "off": the full lurker from the start
HANDOVER = -1  # the idle loop's result when the full lurker must take over


def lone_args(argv: Sequence[str]) -> tuple[str | None, str, str] | None:
    """(home, nick, log level) when `argv` asks for exactly one lurker
    (`[--home H] [--log-level L] lurk [--home H] NICK`); None for anything else, which the
    full command line parses (and explains when it is wrong)."""
    if os.environ.get(SWITCH, "on").strip().lower() == "off":
        return None
    home: str | None = None
    level = "info"
    rest = list(argv)
    seen_lurk = False
    nick: str | None = None
    while rest:
        arg = rest.pop(0)
        if arg in ("--home", "--log-level") and rest:
            value = rest.pop(0)
        elif arg.startswith(("--home=", "--log-level=")):
            arg, _, value = arg.partition("=")
        elif arg == "lurk" and not seen_lurk:
            seen_lurk = True
            continue
        elif seen_lurk and nick is None and not arg.startswith("-"):
            nick = arg
            continue
        else:
            return None
        if arg == "--home":
            home = value
        elif seen_lurk or value not in LEVELS:
            return None  # --log-level belongs before the command
        else:
            level = value
    return (home, nick, level) if seen_lurk and nick is not None else None


class Log:
    """The lines structlog would write (room/logs.py: JSON when not on a terminal), for the
    idle loop, which does not load structlog. Nothing it logs holds a secret: this process
    reads none until the hand-over."""

    def __init__(self, level: str, **bound: Any) -> None:
        self._floor = LEVELS.index(level)
        self._bound = bound
        self._json = not sys.stderr.isatty()

    def _write(self, level: str, event: str, fields: dict[str, Any]) -> None:
        if LEVELS.index(level) < self._floor:
            return
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        record = {**self._bound, **fields}
        if self._json:
            line = json.dumps({**record, "event": event, "level": level, "timestamp": stamp + "Z"})
        else:
            pairs = " ".join(f"{key}={value!r}" for key, value in record.items())
            line = f"{stamp}Z [{level:<8}] {event:<30} {pairs}"
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def debug(self, event: str, **fields: Any) -> None:
        self._write("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._write("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._write("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._write("error", event, fields)


def run(home: str | None, nick: str, level: str) -> int:
    """`bullpen lurk NICK` started alone: checked in a child, idle here, full on a wake."""
    log = Log(level, nick=nick)
    log.info("checking the start in a child")  # its imports leave with it
    plan = _checked(home, nick, level)
    if not plan["lean"]:
        return _full(home, nick, level, None)
    lock = nicklock.take(Path(plan["lock"]), nick)
    try:
        code = asyncio.run(_idle(plan, log))
    except BaseException:
        os.close(lock)
        raise
    return _full(home, nick, level, lock) if code == HANDOVER else code


def _checked(home: str | None, nick: str, level: str) -> dict[str, Any]:
    """Run the full lurker's start checks in a forked child; its answer, or its error raised."""
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: import everything, check, answer, and leave no trace
        os.close(read_end)
        answer: dict[str, Any]
        try:
            from agents.runtime.leancheck import check

            answer = check(home, nick, level)
        except BullpenError as exc:
            kind = next(k for k, error in ERRORS.items() if isinstance(exc, error))
            answer = {"error": exc.message, "kind": kind}
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            answer = {"error": f"{exc.strerror or exc}{where}", "kind": "BullpenError"}
        except BaseException:
            traceback.print_exc()
            answer = {"error": "the lurker's start checks failed (above)", "kind": "BullpenError"}
        try:  # whatever happens, this child never returns into the caller's code
            with os.fdopen(write_end, "wb") as out:
                out.write(json.dumps(answer).encode())
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answers:
        raw = answers.read()
    os.waitpid(pid, 0)
    try:
        answer = json.loads(raw)
    except ValueError:
        raise BullpenError(f"the start checks of {nick}'s lurker ended without an answer") from None
    if "error" in answer:
        raise ERRORS[answer["kind"]](answer["error"])
    return dict(answer)


async def _idle(plan: dict[str, Any], log: Log) -> int:
    """Follow the room until a line may wake the nick (HANDOVER) or the process is stopped."""
    nick = plan["nick"]
    wake, trusted = frozenset(plan["wake"]), frozenset(plan["trusted"])
    cursor = Cursor(Path(plan["cursor"]))
    start = Position(plan["seq"], plan["offset"])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = StopSignals()  # SIGTERM (systemd) ends with 0, Ctrl-C with 130
    signals.install(loop, stop.set)
    follower = RawFollower(
        Path(plan["room"]), start, safety_s=plan["safety_s"], to=f"@{nick}", log=log
    )
    passed = start  # the furthest position whose lines all surely fail the wake rules

    async def consume() -> None:
        nonlocal passed
        async for raw, position in follower.follow():
            try:
                line = strictjson.loads(raw)
            except strictjson.JsonRejected:
                return  # the full lurker says what is wrong with it
            reason = certain_refusal(line, nick, wake, trusted) if isinstance(line, dict) else None
            if reason is None:
                return
            log.debug("not waking", seq=position.seq, why=reason)
            passed = position

    log.info(
        "lurking",
        wake=sorted(wake),
        source="file",
        after=start.seq,
        lean=True,
        version=__version__,
    )
    consuming = asyncio.create_task(consume())
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait([consuming, stopped], return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    code = 0
    if consuming.done():
        try:
            consuming.result()
            code = HANDOVER
        except CursorAhead as exc:
            log.error("room is shorter than the cursor; stopping", error=exc.message)
            print(f"bullpen lurk {nick}: {exc.message}", file=sys.stderr)
            return EXIT_CONFIG
        except WatchUnavailable as exc:
            log.warning(
                "cannot watch the room file; the full lurker follows the hub", error=str(exc)
            )
            code = HANDOVER
    else:
        consuming.cancel()
        await asyncio.gather(consuming, return_exceptions=True)
    if passed != start:
        cursor.save(passed)
    if code == HANDOVER:
        log.info("a line may wake us: loading the full lurker", after=passed.seq)
    else:
        log.info("stopped", cursor=passed.seq)
    return signals.exit_code(code)


def _full(home: str | None, nick: str, level: str, lock: int | None) -> int:
    """The full lurker (agents.runtime.lurker), holding the lock the idle loop took."""
    from agents.home import Home
    from agents.runtime.lurker import Lurker, serve
    from room import logs

    logs.configure(level=level)
    where = Home.at(home)
    where.require()
    return serve(Lurker(where, nick, lock=lock))

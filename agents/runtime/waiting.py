"""What a command does while it waits on a run: no silent waits, and a way out.

`bullpen expedition`, `bullpen build` and `bullpen backpass` post one ask and then wait, for
minutes or hours. So that the person at the terminal is never left guessing:

- before posting, the nick asked must be listening: a ping (as `bullpen trust check`
  sends) must come back within seconds, or the command stops and says what to start;
- while it waits, a line every HEARTBEAT_S (or $BULLPEN_HEARTBEAT_S) says whom the run
  waits on: a step's nick, or the operator when a report waits at the gate for an answer;
- Ctrl-C asks at once (even at a prompt) whether to cancel the run (`bullpen cancel`) or
  detach from it; with no terminal, at end of input or at a second Ctrl-C it detaches and
  says how to follow and cancel the run. Either way it exits 130.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

from agents.runtime.ping import ping
from agents.runtime.terminal import read_line
from room.errors import BullpenError

if TYPE_CHECKING:
    from room.client import RoomClient

EXIT_INTERRUPTED = 130
HEARTBEAT_S = 30.0
HEARTBEAT_ENV = "BULLPEN_HEARTBEAT_S"  # a quieter (or chattier) terminal: seconds between lines
PING_S = 15.0  # how long a listening nick may take to answer a ping
CANCEL_PROMPT = "Ctrl-C: cancel the run {thread} [c], or detach and leave it running [d]? "
GATE_PREFIX = "dig-report"  # the key of a report that waits at the gate for the operator


class NotListening(BullpenError):
    """The nick a command would ask does not answer a ping: nothing would ever reply."""


async def require_listening(
    client: RoomClient, nick: str, timeout: float = PING_S, err: TextIO | None = None
) -> dict[str, Any]:
    """Ping `nick` (its lurker answers a ping itself): its pong, which says where it runs and
    on which society.toml (agents.runtime.ping); NotListening when no pong comes back.
    Says first what it waits for, on `err` (stderr): a pause of up to `timeout` s."""
    print(
        f"checking that @{nick} is listening (a ping, up to {timeout:g} s) …",
        file=err or sys.stderr,
        flush=True,
    )
    answered = await ping(client, [nick], timeout)
    if nick in answered.unsent:  # the hub refused or could not be reached: its own error
        raise answered.unsent[nick]
    if nick in answered.pongs:
        return answered.pongs[nick]
    raise NotListening(
        f"@{nick} did not answer a ping within {timeout:g} s, so nothing would act on the "
        f"run: its lurker is not running (or cannot reach the hub). Start it with `bullpen up` "
        f"(or `systemctl --user start bullpen-lurker@{nick}`), check it with `bullpen trust "
        "check`, then run this again. Nothing was started"
    )


def heartbeat_seconds() -> float:
    """The quiet time before a heartbeat line: $BULLPEN_HEARTBEAT_S when it is a number of
    seconds from 1 to 3600, else HEARTBEAT_S (a bad value is said, not ignored)."""
    text = os.environ.get(HEARTBEAT_ENV)
    if text is None:
        return HEARTBEAT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 1 <= value <= 3600:
        print(
            f"bullpen: warning: {HEARTBEAT_ENV}={text!r} is not a number of seconds from 1 to "
            f"3600; a heartbeat every {HEARTBEAT_S:g} s",
            file=sys.stderr,
        )
        return HEARTBEAT_S
    return value


def _ago(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _epoch(ts: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class Heartbeat:
    """Says, when nothing else was said for a while, which step of the run is running."""

    def __init__(self, err: TextIO, foreman: str = "foreman", every: float = HEARTBEAT_S) -> None:
        self.err = err
        self.foreman = foreman
        self.gate: str | None = None  # the nick a report at the gate waits on, if one does
        self.every = every
        self.started = time.time()
        self.quiet_since = time.monotonic()
        self.asks: dict[str, tuple[str, str, float]] = {}  # id -> nick, first line, asked at

    def seen(self, line: dict[str, Any]) -> None:
        """Feed every line of the run's thread."""
        if line.get("from") == self.foreman and line.get("type") == "ask":
            body = str(line.get("body") or "").strip().splitlines()
            at = _epoch(line.get("ts")) or time.time()
            self.asks[str(line.get("id"))] = (str(line.get("to")), body[0][:80] if body else "", at)
        elif line.get("type") == "reply":
            self.asks.pop(str(line.get("in_reply_to") or ""), None)
            data = line.get("data") or {}
            if line.get("from") == self.foreman:
                waits = str(data.get("key", "")).startswith(GATE_PREFIX) and not data.get("final")
                self.gate = str(line.get("to", "")).removeprefix("@") if waits else None
            elif line.get("to") == f"@{self.foreman}":
                self.gate = None  # the operator answered

    def said(self) -> None:
        """Something was printed: the next heartbeat is a full period away."""
        self.quiet_since = time.monotonic()

    def status(self) -> str:
        now = time.time()
        if self.gate is not None and not self.asks:
            return (
                f"… waiting on @{self.gate} (you): the report above waits at the gate for an "
                f"answer ({_ago(now - self.started)} since the start); Ctrl-C to cancel or detach"
            )
        if not self.asks:
            return f"… waiting on @{self.foreman} ({_ago(now - self.started)} since the start)"
        running = sorted(self.asks.values(), key=lambda a: a[2])
        nick, what, at = running[0]
        more = f" (and {len(running) - 1} more)" if len(running) > 1 else ""
        return f"… still running: {nick} {what} for {_ago(now - at)}{more}"

    async def run(self) -> None:
        while True:
            await asyncio.sleep(max(0.5, self.every - (time.monotonic() - self.quiet_since)))
            if time.monotonic() - self.quiet_since >= self.every:
                print(self.status(), file=self.err, flush=True)
                self.said()


async def interruptible(
    waiting: Awaitable[int],
    client: RoomClient,
    thread: str,
    err: TextIO,
    *,
    interactive: bool | None = None,
) -> int:
    """`waiting`'s exit code, or, on Ctrl-C, the operator's choice: cancel the run or detach."""
    loop = asyncio.get_running_loop()
    hit = asyncio.Event()
    task = asyncio.ensure_future(waiting)
    heard = asyncio.ensure_future(hit.wait())
    try:
        loop.add_signal_handler(signal.SIGINT, hit.set)
    except (NotImplementedError, RuntimeError):  # not the main thread: no Ctrl-C to catch
        heard.cancel()
        return await task
    try:
        await asyncio.wait([task, heard], return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        heard.cancel()
    if interactive is None:
        interactive = sys.stdin.isatty()
    answer = await _cancel_or_detach(thread, err) if interactive else ""
    if answer.lower() in ("c", "cancel"):
        from agents.runtime.cancel import post_cancel

        stored = await post_cancel(client, thread, "cancelled at the terminal (Ctrl-C)")
        print(
            f"cancel posted (seq {stored.get('seq')}): the foreman stops the run {thread}",
            file=err,
        )
    else:
        print(
            f"detached: the run {thread} goes on in the room. Follow it with `bullpen tail "
            f"--thread {thread}`; stop it with `bullpen cancel {thread}`",
            file=err,
        )
    return EXIT_INTERRUPTED


async def _cancel_or_detach(thread: str, err: TextIO) -> str:
    """The operator's answer to CANCEL_PROMPT; "" (detach) at end of input or at a second
    Ctrl-C, which must not cut off the line saying how to follow and cancel the run."""
    loop = asyncio.get_running_loop()
    again = asyncio.Event()
    print("", file=err)
    typed = asyncio.ensure_future(read_line(CANCEL_PROMPT.format(thread=thread), err))
    second = asyncio.ensure_future(again.wait())
    loop.add_signal_handler(signal.SIGINT, again.set)
    try:
        await asyncio.wait([typed, second], return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        second.cancel()
        pending = not typed.done()
        typed.cancel()
        await asyncio.gather(typed, return_exceptions=True)
    if pending or typed.cancelled() or typed.exception() is not None:
        print("", file=err)  # the prompt's line was left open
        return ""
    return typed.result().strip()


async def follow_run(
    follow: Callable[[Heartbeat], Awaitable[int]],
    client: RoomClient,
    thread: str,
    err: TextIO,
    foreman: str = "foreman",
) -> int:
    """Follow a run as every command that starts one does: `follow(heartbeat)` reads the
    thread and returns the exit code; a heartbeat speaks when it is quiet, and Ctrl-C asks
    to cancel or detach (interruptible)."""
    heartbeat = Heartbeat(err, foreman, heartbeat_seconds())
    beating = asyncio.create_task(heartbeat.run())
    try:
        return await interruptible(follow(heartbeat), client, thread, err)
    finally:
        beating.cancel()

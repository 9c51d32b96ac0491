"""A blocking step run in a forked child process, killed at its timeout.

A plain-function step used to run on a daemon thread: when it overran, the
lurker replied FAILED but the thread went on burning CPU and memory, because a
thread cannot be stopped. A child process can. Each call forks (so the step,
its module and its StepContext are already there, nothing is pickled on the way
in); the child runs in its own process group and sends back the pickled result
or exception; at the timeout, or if the lurker is stopping, the whole group is
SIGKILLed and reaped. Should the lurker itself be killed, the kernel kills the
child too (PR_SET_PDEATHSIG): a restarted lurker never finds the last one's step
still running, holding the nick's lock.

What a blocking step cannot do from the child: change the lurker's memory (a
module-level cache it fills is the child's, gone when it exits) or await the
lurker's coroutines. `ctx.judge` is a coroutine function bound to the lurker's
event loop; a step that asks a model must be a coroutine function (every
shipped one is), which runs in the lurker and is cancelled at its timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import multiprocessing
import os
import pickle
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

_FORK = multiprocessing.get_context("fork")
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class StepDied(Exception):
    """The child ended without sending a result (killed, or it called os._exit)."""


def _die_with(parent: int) -> None:
    """Have the kernel SIGKILL this child when the lurker dies, however it dies: an
    orphaned step would go on burning, and hold the nick's lock (a flock it inherited)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the request took effect
        os._exit(1)


def _child(func: Callable[..., Any], args: tuple[Any, ...], send: Connection, parent: int) -> None:
    _die_with(parent)
    os.setsid()  # its own process group: killed whole, with anything it started
    signal.set_wakeup_fd(-1)  # the lurker's loop must never hear this child's signals
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    try:
        outcome: tuple[str, Any] = ("ok", func(*args))
    except BaseException as exc:  # handed back to the lurker, which reports it
        outcome = ("raised", exc)
    try:
        payload = pickle.dumps(outcome)
        pickle.loads(payload)  # what the lurker cannot rebuild is sent as plain text
    except Exception as exc:
        kind, value = outcome
        shown = f"{type(value).__name__}: {value}" if kind == "raised" else type(value).__name__
        problem = RuntimeError(f"{shown} (it cannot be passed back: {type(exc).__name__})")
        payload = pickle.dumps(("raised", problem))
    send.send_bytes(payload)
    send.close()


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:  # not yet in its own group, or already gone
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def run_forked(func: Callable[..., Any], *args: Any) -> Any:
    """`func(*args)` in a forked child; its result, or the exception it raised.

    Cancel it (asyncio.wait_for does at the timeout) and the child's process group is
    killed and reaped before the cancellation goes on: nothing is left running.
    """
    loop = asyncio.get_running_loop()
    receive, send = _FORK.Pipe(duplex=False)
    child = _FORK.Process(
        target=_child, args=(func, args, send, os.getpid()), name="bullpen-step", daemon=True
    )
    reader: asyncio.Future[bytes] | None = None
    answered = False
    try:
        child.start()
        send.close()  # only the child writes: its exit is our end of file
        readable: asyncio.Future[None] = loop.create_future()
        fd = receive.fileno()

        def wake() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(fd, wake)
        try:
            await readable  # a result, or end of file when the child died
        finally:
            loop.remove_reader(fd)
        reader = asyncio.ensure_future(asyncio.to_thread(receive.recv_bytes))
        try:
            payload = await asyncio.shield(reader)
        except EOFError:
            child.join(1.0)
            raise StepDied(
                f"the step's process ended without a result (exit code {child.exitcode})"
            ) from None
        answered = True
    finally:
        if not answered and child.pid is not None:
            _kill(child.pid)
        if reader is not None:  # a read in progress ends at once: the child is gone
            await asyncio.gather(reader, return_exceptions=True)
        if child.pid is not None:
            await asyncio.to_thread(child.join)
        receive.close()
    kind, value = pickle.loads(payload)
    if kind == "raised":
        raise value
    return value

"""What a lurker runs when woken: a Python step or an external command.

Either way the result is an Outcome: a Reply to post, an Outbox of several
posts (the foreman's asks and reports), or a Failure the lurker posts as
`[<nick> FAILED — reason]`. A handler that raises, exits non-zero, prints
nothing usable or overruns its timeout is a Failure: never silence.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from agents.config import NickConfig
from agents.step import Reply, StepContext
from room.errors import BullpenError, ConfigError
from room.message import Message

log = structlog.get_logger("agents.handlers")

STDERR_TAIL = 2000


@dataclass(frozen=True)
class OutPost:
    """One post a handler wants made, as its own nick."""

    to: str
    body: str
    type: str = "ask"
    data: dict[str, Any] | None = None
    in_reply_to: str | None = None
    thread: str | None = None


@dataclass(frozen=True)
class Outbox:
    """Several posts instead of one reply: how the foreman speaks."""

    posts: list[OutPost] = field(default_factory=list)


@dataclass(frozen=True)
class Failure:
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


Outcome = Reply | Outbox | Failure


def _as_outcome(value: Any) -> Outcome:
    if isinstance(value, Reply | Outbox | Failure):
        return value
    if isinstance(value, str):
        return Reply(value)
    if isinstance(value, dict) and isinstance(value.get("body"), str):
        data = value.get("data")
        return Reply(value["body"], data if isinstance(data, dict) else None)
    return Failure(f"the step returned {type(value).__name__}, not a Reply")


class Handler:
    """Runs one message through the nick's work, within its timeout."""

    async def run(self, message: Message, ctx: StepContext, timeout: float) -> Outcome:
        raise NotImplementedError

    def tick(self) -> Callable[[StepContext], Any] | None:
        """A periodic hook (the foreman's overdue check), if the handler has one."""
        return None


class PythonStep(Handler):
    def __init__(self, target: str) -> None:
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
            func = getattr(module, attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(
                f"handler {target!r} cannot be loaded ({exc}); check the module and function name"
            ) from None
        if not callable(func):
            raise ConfigError(f"handler {target!r} is not callable")
        self.target = target
        self.func = func

    def tick(self) -> Callable[[StepContext], Any] | None:
        return getattr(self.func, "tick", None)

    async def run(self, message: Message, ctx: StepContext, timeout: float) -> Outcome:
        try:
            if inspect.iscoroutinefunction(self.func) or inspect.iscoroutinefunction(
                getattr(self.func, "__call__", None)  # noqa: B004 - a callable object's method
            ):
                result = await asyncio.wait_for(self.func(message, ctx), timeout)
            else:
                # A blocking step runs on a daemon thread; if it overruns, the reply says so
                # and the thread is abandoned (it cannot hold up the lurker's exit).
                result = await asyncio.wait_for(_in_daemon_thread(self.func, message, ctx), timeout)
        except TimeoutError:
            return Failure(f"timed out after {timeout:g} s", {"timeout_s": timeout})
        except BullpenError as exc:
            return Failure(exc.message, exc.to_dict())
        except Exception as exc:
            log.exception("step raised", target=self.target, message_id=message.id)
            return Failure(f"{type(exc).__name__}: {exc}")
        return _as_outcome(result)


def _in_daemon_thread(func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(outcome: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(outcome)

    def work() -> None:
        try:
            outcome = func(*args)
        except BaseException as exc:  # handed to the awaiting coroutine
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, outcome, None)

    threading.Thread(target=work, name="bullpen-step", daemon=True).start()
    return future


class CommandHandler(Handler):
    """An external program: the message as JSON on stdin, the reply on stdout."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.argv = argv
        self.env = env

    async def run(self, message: Message, ctx: StepContext, timeout: float) -> Outcome:
        env = {
            **os.environ,
            **self.env,
            "BULLPEN_NICK": ctx.nick,
            "BULLPEN_HOME": str(ctx.home.root),
            "BULLPEN_MESSAGE_ID": message.id,
            "BULLPEN_THREAD": message.thread or "",
        }
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,  # its own process group: killed whole, never by name
            )
        except OSError as exc:
            return Failure(f"cannot start {self.argv[0]!r} ({exc.strerror})")
        payload = json.dumps(message.to_dict(), ensure_ascii=False).encode()
        try:
            out, err = await asyncio.wait_for(proc.communicate(payload), timeout)
        except TimeoutError:
            await kill_group(proc)
            return Failure(f"timed out after {timeout:g} s", {"timeout_s": timeout})
        except asyncio.CancelledError:
            await kill_group(proc)
            raise
        stderr = err.decode("utf-8", "replace")[-STDERR_TAIL:]
        if proc.returncode != 0:
            return Failure(
                f"{self.argv[0]} exited with status {proc.returncode}",
                {"exit_code": proc.returncode, "stderr": stderr},
            )
        text = out.decode("utf-8", "replace").strip()
        if text.startswith("{"):
            try:
                obj = json.loads(text)
            except ValueError:
                obj = None
            if isinstance(obj, dict) and isinstance(obj.get("body"), str):
                return _as_outcome(obj)
        if not text:
            return Failure(f"{self.argv[0]} printed nothing", {"stderr": stderr})
        return Reply(text)


async def kill_group(proc: asyncio.subprocess.Process) -> None:
    """Stop the program we started and everything it started, and reap it."""
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            await asyncio.wait_for(proc.wait(), grace)
            break
        except TimeoutError:
            continue


def load(config: NickConfig) -> Handler:
    if config.mcp_agent is not None:
        from agents.mcp import handler as mcp_handler  # loaded only by nicks that use it

        return mcp_handler.load(config)
    if config.handler is not None:
        return PythonStep(config.handler)
    assert config.command is not None
    return CommandHandler(config.command, config.env)

"""The handler kinds a lurker can run when woken, and the table it finds them in.

`handler` is a Python step (`module:function`), `command` an external
program (the message on stdin, the reply on stdout), `mcp_agent` an
MCP-speaking agent (agents/mcp/handler.py). A new kind is a loader added to
KINDS and a key of NickConfig. A handler that raises, exits non-zero, prints
nothing usable or overruns its timeout is a Failure: never silence.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
from collections.abc import Callable
from typing import Any

import structlog

from agents.config import NickConfig
from agents.runtime.forked import StepDied, run_forked
from agents.runtime.outcome import Failure, Handler, Outcome, as_outcome
from agents.runtime.procgroup import kill_group
from agents.runtime.step import Reply, StepContext
from room.errors import BullpenError, ConfigError
from room.message import Message

log = structlog.get_logger("agents.runtime.handlers")

STDERR_TAIL = 2000


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

    def needs_replies(self) -> bool:
        return bool(getattr(self.func, "wakes_on_replies", False))

    def prepare(self, ctx: StepContext) -> None:
        prepare = getattr(self.func, "prepare", None)
        if callable(prepare):
            prepare(ctx)

    async def run(self, message: Message, ctx: StepContext, timeout: float) -> Outcome:
        try:
            if inspect.iscoroutinefunction(self.func) or inspect.iscoroutinefunction(
                getattr(self.func, "__call__", None)  # noqa: B004 - a callable object's method
            ):
                result = await asyncio.wait_for(self.func(message, ctx), timeout)
            else:
                # A blocking step runs in a forked child, killed at the timeout: a step that
                # overruns stops, rather than burn CPU on a thread after its FAILED reply.
                result = await asyncio.wait_for(run_forked(self.func, message, ctx), timeout)
        except TimeoutError:
            return Failure(f"timed out after {timeout:g} s", {"timeout_s": timeout})
        except BullpenError as exc:
            return Failure(exc.message, exc.to_dict())
        except StepDied as exc:
            return Failure(str(exc))
        except Exception as exc:
            log.exception("step raised", target=self.target, message_id=message.id)
            return Failure(f"{type(exc).__name__}: {exc}")
        return as_outcome(result)


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
        # The message as it is, plus one key: the lessons this wake hands over (docs/memory.md).
        stdin = {**message.to_dict(), "lessons": [lesson.to_dict() for lesson in ctx.lessons]}
        payload = json.dumps(stdin, ensure_ascii=False).encode()
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
                return as_outcome(obj)
        if not text:
            return Failure(f"{self.argv[0]} printed nothing", {"stderr": stderr})
        return Reply(text)


# Each handler kind is a key of [nicks.NICK] and the loader that builds it. The runtime reads
# this table only; a kind's module is imported by the nick that uses it.
KINDS: dict[str, str] = {
    "handler": "agents.runtime.handlers:python_step",
    "command": "agents.runtime.handlers:command_handler",
    "mcp_agent": "agents.mcp.handler:load",
}


def python_step(config: NickConfig) -> Handler:
    assert config.handler is not None
    return PythonStep(config.handler)


def command_handler(config: NickConfig) -> Handler:
    assert config.command is not None
    return CommandHandler(config.command, config.env)


def load(config: NickConfig) -> Handler:
    """The handler of the one kind this nick's table sets (NickConfig checks it is one)."""
    for key, target in KINDS.items():
        if getattr(config, key) is not None:
            module, _, name = target.partition(":")
            loader: Callable[[NickConfig], Handler] = getattr(importlib.import_module(module), name)
            return loader(config)
    raise ConfigError(f"a nick's table sets none of {', '.join(KINDS)}")

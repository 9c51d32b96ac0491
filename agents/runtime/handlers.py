"""The handler kinds a lurker can run when woken, and the table it finds them in.

`handler` is a Python step (`module:function`), `command` an external
program (the message on stdin, the reply on stdout), `mcp_agent` an
MCP-speaking agent (agents/mcp/handler.py). A new kind is a loader added to
KINDS and a key of NickConfig. A handler that raises, exits non-zero, prints
nothing usable or overruns its timeout is a Failure: never silence.

A Python step's module is imported on its first wake, not at start (an idle
lurker should not pay for its handler's imports: docs/performance.md, "The
society's footprint"); at start its module is only found, so a typo still
stops the lurker with exit 78. The orchestrators and services whose handler
works before a wake (`prepare`, `tick`, `wakes_on_replies`: the foreman, the
librarian; EAGER) and every nick that wakes on replies load it at start.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.machinery
import importlib.util
import inspect
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from agents.runtime.outcome import Failure, Handler, Outcome, as_outcome
from agents.runtime.procgroup import kill_group
from agents.runtime.step import Reply, Step, StepContext
from room.errors import BullpenError, ConfigError, StepFailed
from room.message import Message

if TYPE_CHECKING:
    from agents.config import NickConfig

log = structlog.get_logger("agents.runtime.handlers")

STDERR_TAIL = 2000
# Handler modules loaded at start even when their nick does not wake on replies: their
# step works before its first wake (prepare, tick) or must be checked for wakes_on_replies.
EAGER = ("agents.foreman", "agents.librarian")


def eager(target: str, wakes_on_replies: bool) -> bool:
    """Whether a Python step's module is loaded at start rather than on its first wake."""
    module = target.partition(":")[0]
    declared = any(module == name or module.startswith(name + ".") for name in EAGER)
    return declared or wakes_on_replies


def module_exists(name: str) -> bool:
    """Whether `name` can be imported, found without importing it or its packages (their
    __init__ may import much more: what a lazy step defers)."""
    if name in sys.modules:
        return True
    parts = name.split(".")
    path: list[str] | None = None
    for depth, part in enumerate(parts):
        loaded = sys.modules.get(".".join(parts[: depth + 1]))
        spec = loaded.__spec__ if loaded is not None else None
        if spec is None:
            try:
                spec = importlib.machinery.PathFinder.find_spec(part, path)
            except (ImportError, ValueError):
                return False
            if spec is None and depth == 0:  # a built-in or frozen top-level module
                return importlib.util.find_spec(part) is not None
        if spec is None:
            return False
        locations = spec.submodule_search_locations
        if depth < len(parts) - 1 and locations is None:
            return False  # a module, not a package, with a name below it
        path = list(locations) if locations is not None else None
    return True


class PythonStep(Handler):
    """A `module:function` step; `lazy`: its module is imported on its first wake."""

    def __init__(self, target: str, lazy: bool = False) -> None:
        module_name = target.partition(":")[0]
        self.target = target
        self._func: Step | None = None
        self._within: Any = None  # agents.seats.runcall.within, loaded with the step
        if not lazy:
            self._load()
        elif not module_exists(module_name):
            raise ConfigError(
                f"handler {target!r} cannot be loaded (no module named {module_name!r}); "
                "check the module and function name"
            )

    def _load(self) -> Step:
        if self._func is not None:
            return self._func
        module_name, _, attr = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
            func = getattr(module, attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(
                f"handler {self.target!r} cannot be loaded ({exc}); check the module and "
                "function name"
            ) from None
        if not callable(func):
            raise ConfigError(f"handler {self.target!r} is not callable")
        step: Step = func
        # Loaded with the step, not on a wake: the foreman's wake opens no file.
        from agents.seats.runcall import within  # model calls made in a step name its ask

        self._within = within
        self._func = step
        return step

    @property
    def func(self) -> Step:
        return self._load()

    @property
    def loaded(self) -> bool:
        return self._func is not None

    def tick(self) -> Callable[[StepContext], Any] | None:
        return getattr(self._func, "tick", None) if self.loaded else None

    def needs_replies(self) -> bool:
        return bool(getattr(self._func, "wakes_on_replies", False)) if self.loaded else False

    def preflight_check(
        self, ctx: StepContext
    ) -> Callable[[dict[str, Any], StepContext], dict[str, Any]] | None:
        """The step's pre-flight check (agents.runtime.preflight.with_preflight), its module
        loaded first, as a first wake loads it, if it was not; StepFailed if it cannot be."""
        if not self.loaded:
            problem = self._first_load(ctx)
            if problem is not None:
                raise StepFailed(problem.reason)
        check = getattr(self.func, "preflight", None)
        return check if callable(check) else None

    def prepare(self, ctx: StepContext) -> None:
        if not self.loaded:
            return  # done on the first wake, once the module is loaded
        prepare = getattr(self._func, "prepare", None)
        if callable(prepare):
            prepare(ctx)

    def _first_load(self, ctx: StepContext) -> Failure | None:
        """Load a lazy step on its first wake; a Failure that says why when it cannot be."""
        try:
            self._load()
            if self.needs_replies():
                return Failure(
                    f"{self.target} waits for replies, but {ctx.nick} does not wake on them: "
                    f"set wake_replies = true under [nicks.{ctx.nick}] in society.toml"
                )
            if self.tick() is not None:
                log.warning(
                    "this step has a periodic check, which runs only when its module is loaded "
                    "at start: set wake_replies = true for it",
                    target=self.target,
                )
            self.prepare(ctx)
        except BullpenError as exc:
            return Failure(exc.message, exc.to_dict())
        except Exception as exc:
            log.exception("step could not be loaded", target=self.target)
            return Failure(f"{self.target} could not be loaded ({type(exc).__name__}: {exc})")
        return None

    async def run(self, message: Message, ctx: StepContext, timeout: float) -> Outcome:
        if not self.loaded:
            problem = self._first_load(ctx)
            if problem is not None:
                return problem
        with self._within(message.thread, message.seq, message.data):
            return await self._run(message, ctx, timeout)

    async def _run(self, message: Message, ctx: StepContext, timeout: float) -> Outcome:
        try:
            if inspect.iscoroutinefunction(self.func) or inspect.iscoroutinefunction(
                getattr(self.func, "__call__", None)  # noqa: B004 - a callable object's method
            ):
                result = await asyncio.wait_for(self.func(message, ctx), timeout)
            else:
                # A blocking step runs in a forked child, killed at the timeout: a step that
                # overruns stops, rather than burn CPU on a thread after its FAILED reply.
                from agents.runtime.forked import StepDied, run_forked  # on the first fork

                try:
                    result = await asyncio.wait_for(run_forked(self.func, message, ctx), timeout)
                except StepDied as exc:
                    return Failure(str(exc))
        except TimeoutError:
            return Failure(f"timed out after {timeout:g} s", {"timeout_s": timeout})
        except BullpenError as exc:
            return Failure(exc.message, exc.to_dict())
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
        if (message.data or {}).get("traceparent"):  # a traced run's step: its spans join it
            from agents.telemetry.process import handled_traceparent

            traceparent = handled_traceparent(message, ctx.nick)
            if traceparent is not None:
                env["TRACEPARENT"] = traceparent
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


def python_step(config: NickConfig, wakes_on_replies: bool = True) -> Handler:
    assert config.handler is not None
    return PythonStep(config.handler, lazy=not eager(config.handler, wakes_on_replies))


def command_handler(config: NickConfig) -> Handler:
    assert config.command is not None
    return CommandHandler(config.command, config.env)


def load(config: NickConfig, wakes_on_replies: bool | None = None) -> Handler:
    """The handler of the one kind this nick's table sets (NickConfig checks it is one).

    `wakes_on_replies` given (the lurker's and `up`'s start): a Python step is loaded now
    only when eager() says so, else on its first wake. None: loaded now."""
    if config.handler is not None:
        return python_step(config, True if wakes_on_replies is None else wakes_on_replies)
    for key, target in KINDS.items():
        if getattr(config, key) is not None:
            module, _, name = target.partition(":")
            loader: Callable[[NickConfig], Handler] = getattr(importlib.import_module(module), name)
            return loader(config)
    raise ConfigError(f"a nick's table sets none of {', '.join(KINDS)}")

"""One process `bullpen up` runs: how it is started (forked by the zygote, or a program of its
own), where its output goes (a rotating log) and how its end is waited for.

Split from agents/runtime/up.py, which decides when each child starts, restarts and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from agents.config import LogsConfig
from agents.runtime.rotating import RotatingLog, pump
from agents.runtime.zygote import Forked, Zygote, ZygoteGone

__all__ = ["Child"]

PUMP_DRAIN_S = 2.0  # how long a child's last output may take to reach its log


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Ask Linux to SIGTERM this child if `up` dies without cleaning up."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    logs: LogsConfig = field(default_factory=LogsConfig)
    proc: asyncio.subprocess.Process | Forked | None = None
    zygote: Zygote | None = None  # forks this child when there is one (the lurkers)
    pumping: asyncio.Task[None] | None = None
    started_at: float = 0.0
    restarts: int = 0
    backoff: float = 1.0
    gave_up: bool = False
    restart_asked: bool = False  # stopped on purpose to start again: not a crash
    history: list[int] = field(default_factory=list)
    ready_marker: bytes = b""  # the output line that says the child is ready
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self, env: dict[str, str]) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = RotatingLog(self.log_path, self.logs.max_bytes, self.logs.keep)
        try:
            self.proc = await self._forked()
            if self.proc is None:
                self.proc = await asyncio.create_subprocess_exec(
                    *self.argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                    env=env,
                    preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                )
        except BaseException:
            log.close()
            raise
        assert self.proc.stdout is not None
        self.ready = asyncio.Event()
        self.pumping = asyncio.create_task(
            pump(self.proc.stdout, log, self.ready_marker, self.ready)
        )
        self.started_at = time.monotonic()

    async def _forked(self) -> Forked | None:
        """This child forked by the zygote (its imports shared with every lurker), or None
        to start it on its own: no zygote, or the zygote is gone."""
        if self.zygote is None or self.zygote.gone:
            return None
        try:
            return await self.zygote.spawn(self.argv[2:])  # what follows `python -m`
        except ZygoteGone:
            return None

    async def wait(self) -> int:
        """The child's exit code, once its last output is in its log."""
        assert self.proc is not None
        code = await self.proc.wait()
        if self.pumping is not None:
            # A grandchild may still hold the pipe: its output keeps going to the log,
            # but it must not keep `up` from restarting or stopping this child.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.pumping), PUMP_DRAIN_S)
        return code

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

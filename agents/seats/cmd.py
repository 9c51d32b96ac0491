"""The cmd seat: an external program is the model.

The prompt goes to the program's stdin, its stdout is the completion, and a
non-zero exit is a failure whose message carries the exit code and the last
lines of stderr. The program runs in a session of its own, so a timeout (or
a cancelled judgment) kills its whole process group — the program and
anything it started — by the group id this seat created, never by a name
or a pattern.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import time
from typing import TYPE_CHECKING, ClassVar

import structlog

from agents.seats.base import Seat
from agents.seats.request import JudgmentRequest

if TYPE_CHECKING:
    from agents.seats.tables import CmdSeatConfig

log = structlog.get_logger("agents.seats")

STDERR_LINES = 5
STDERR_CHARS = 600


def _tail(stderr: bytes) -> str:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()[-STDERR_LINES:]
    text = " | ".join(line.strip() for line in lines if line.strip())
    if len(text) > STDERR_CHARS:
        text = "…" + text[-STDERR_CHARS:]
    return text or "(stderr was empty)"


class CmdSeat(Seat):
    kind: ClassVar[str] = "cmd"

    def __init__(self, name: str, config: CmdSeatConfig) -> None:
        super().__init__(name, fallback=config.fallback)
        self.config = config
        self.program = shlex.join(config.command[:1])

    async def complete(self, request: JudgmentRequest) -> str:
        command = self.config.command
        env = {**os.environ, **self.config.env} if self.config.env else None
        started = time.monotonic()
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise self.fail(
                f"cannot start {self.program}: {exc.strerror or exc}; check "
                f"[seats.{self.name}] command (is it installed and on PATH?)"
            ) from None
        try:
            stdout, stderr = await asyncio.wait_for(
                process.communicate(request.prompt.encode("utf-8")), self.config.timeout_s
            )
        except TimeoutError:
            await self._kill_group(process)
            raise self.fail(
                f"{self.program} did not answer within {self.config.timeout_s:g} s; its process "
                f"group was killed — raise [seats.{self.name}] timeout_s or check the program"
            ) from None
        except BaseException:
            await self._kill_group(process)  # cancelled: leave nothing running
            raise
        log.debug(
            "seat.cmd",
            seat=self.name,
            program=self.program,
            pid=process.pid,
            exit_code=process.returncode,
            elapsed_ms=round((time.monotonic() - started) * 1000),
        )
        if process.returncode != 0:
            how = (
                f"was killed by signal {-process.returncode}"
                if process.returncode is not None and process.returncode < 0
                else f"exited with code {process.returncode}"
            )
            raise self.fail(f"{self.program} {how}; last stderr: {_tail(stderr)}")
        return stdout.decode("utf-8", "replace")

    async def _kill_group(self, process: asyncio.subprocess.Process) -> None:
        # The group id is the pid of the leader this seat started with
        # start_new_session=True. A pid is not reused while a group with that
        # id has members, so this reaches only what this seat started.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        try:
            await asyncio.wait_for(process.wait(), 5)
        except TimeoutError:
            log.warning("seat.cmd_unreaped", seat=self.name, pid=process.pid)
        log.info("seat.cmd_killed", seat=self.name, program=self.program, pgid=process.pid)

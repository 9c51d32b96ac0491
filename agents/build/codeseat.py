"""The code seats a grind climbs: a program that edits the clone, or a model that answers files.

A tier is the name of a `[seats.<name>]` table. A `cmd` seat is a
headless coding agent (Claude Code, opencode, aider) or any program: it
runs with the clone as its working directory, the prompt on stdin and
BULLPEN_SPEC, BULLPEN_TIER and BULLPEN_ITERATION in its environment; it
edits files there and its exit status counts. Its process group is killed
at its `timeout_s`. An `openai` seat (a model server, directly or through
the gateway) answers `{"files": [{"path", "content"}]}`, validated by the
judge and written here, every path confined to the clone. The built-in
`local` seat writes no code: a ladder of only local seats fails at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from agents.roots import OutsideRoot, Roots
from agents.seats import build_seats, make_judge
from agents.seats.registry import parse_seat_table
from agents.seats.request import JudgmentRequest
from agents.seats.tables import CmdSeatConfig, GatewayAccess, OpenAISeatConfig
from room.errors import ConfigError, SeatError

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["CodeTurn", "FilesAnswer", "code_seat_kind", "take_turn"]

MAX_FILE_BYTES = 512 * 1024
NO_CODE_SEAT = "no code-writing seat: set tiers or [build] tiers to a model seat, see docs/build.md"


class FileChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1, max_length=400)
    content: str = Field(max_length=MAX_FILE_BYTES)


class FilesAnswer(BaseModel):
    """What an openai code seat (and the testdesign seat) answers."""

    model_config = ConfigDict(extra="forbid")
    files: list[FileChange] = Field(min_length=1, max_length=50)


@dataclass(frozen=True)
class CodeTurn:
    """One turn of a code seat: did it finish, and what went wrong if not."""

    ok: bool
    problem: str | None = None
    fatal: bool = False  # the grind must stop (the seat broke a rule), not just climb


def code_seat_kind(home: Home, name: str) -> str:
    """`cmd`, `openai` or `local` for a tier name; ConfigError for a seat that does not exist."""
    table = home.society.seats.get(name)
    if table is None:
        if name == "local":
            return "local"
        known = ", ".join(sorted(home.society.seats)) or "none"
        raise ConfigError(
            f"the tier {name!r} names no [seats.{name}] table (the seats are {known}); add one "
            "(`bullpen docs build`, code seats) or fix the tier's name"
        )
    return parse_seat_table(name, table).kind


def write_files(clone: Path, files: list[FileChange]) -> list[str]:
    """Write a model's files, every path confined to the clone and never into .git."""
    roots = Roots.single("clone", clone)
    written = []
    for change in files:
        given = Path(change.path)
        if given.is_absolute() or ".." in given.parts or (given.parts and given.parts[0] == ".git"):
            raise OutsideRoot(
                f"the code seat answered the path {change.path!r}, which is not a file inside "
                "the clone (absolute, '..' or .git); nothing of its answer was written",
                path=change.path,
            )
        target = clone / given
        roots.check("clone", target, "a file the code seat wrote")
    for change in files:
        target = clone / change.path
        roots.write_bytes("clone", target, change.content.encode("utf-8"), "a code seat's file")
        written.append(change.path)
    return written


def _seat_env(config: CmdSeatConfig, extra: dict[str, str]) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BULLPEN_")}
    return {**base, **config.env, **extra}


async def _cmd_turn(
    name: str, config: CmdSeatConfig, clone: Path, prompt: str, extra: dict[str, str]
) -> CodeTurn:
    try:
        process = await asyncio.create_subprocess_exec(
            *config.command,
            cwd=clone,
            env=_seat_env(config, extra),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return CodeTurn(False, f"cannot start {config.command[0]}: {exc.strerror}", fatal=True)
    try:
        _, err = await asyncio.wait_for(process.communicate(prompt.encode()), config.timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        return CodeTurn(
            False,
            f"code seat {name} hung: no exit within {config.timeout_s:g} s, its process group "
            f"was killed (raise [seats.{name}] timeout_s if it needs longer)",
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    if process.returncode != 0:
        tail = " | ".join(err.decode("utf-8", "replace").strip().splitlines()[-3:])[-400:]
        return CodeTurn(False, f"code seat {name} exited {process.returncode}: {tail}")
    return CodeTurn(True)


async def _openai_turn(home: Home, nick: str, name: str, clone: Path, prompt: str) -> CodeTurn:
    gateway = None
    if home.has_gateway:
        gateway = GatewayAccess(home.gateway_url(), home.gateway_token_file(nick))
    judge = make_judge(build_seats(home.society.seats, gateway), {"code": name}, home.screen)
    try:
        judgment = await judge("code", JudgmentRequest("code", prompt), FilesAnswer)
    except SeatError as exc:
        return CodeTurn(False, f"code seat {name}: {exc.message}")
    try:
        write_files(clone, judgment.answer.files)
    except OutsideRoot as exc:
        return CodeTurn(False, f"code seat {name} wrote outside the clone: {exc.message}", True)
    return CodeTurn(True)


async def take_turn(
    home: Home, nick: str, name: str, clone: Path, prompt: str, extra: dict[str, str]
) -> CodeTurn:
    """Ask the code seat `name` for the next change in the clone."""
    home.screen.check(prompt, f"the prompt for code seat {name}")
    config: Any = parse_seat_table(name, home.society.seats[name])
    if isinstance(config, CmdSeatConfig):
        return await _cmd_turn(name, config, clone, prompt, extra)
    if isinstance(config, OpenAISeatConfig):
        return await _openai_turn(home, nick, name, clone, prompt)
    return CodeTurn(False, NO_CODE_SEAT, fatal=True)

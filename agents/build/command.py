"""`bullpen build TICKET.md`: post the ticket to the foreman as a `build` run and follow it.

The command does no build work: it reads the ticket, checks it as the
foreman would (an invalid ticket is exit 2 and posts nothing), posts it to
`@foreman` in a new thread `build-<date>-<random>` and long-polls that
thread, printing one plain line per event to stderr (`step 2/4 prepare`,
each grind iteration with its tier and tests passing of total); the final
report goes to stdout. A green build's artifact is then found on this host, or fetched from
the room's object store and its hash checked (agents/build/artifact.py): stderr says where.

Before it posts, the foreman must answer a ping (agents/runtime/waiting.py), and its pong
must name the society.toml on disk: a foreman started before the file was edited would
check the ticket against the old one (a seat added since is its INVALID TICKET), so the
command stops and says to restart it, posting nothing. While it waits, a line every 30 s says which step runs and for how long; Ctrl-C asks whether to
cancel the run or detach from it.

Exit codes: 0 green; 1 red, or a step failed; 2 the ticket is invalid (the
foreman's INVALID TICKET), or the ticket file cannot be read; 1 also when the foreman
does not answer or runs an older society.toml (nothing posted); 5 the run was
cancelled (`bullpen cancel`); 75 no final report within --wait-timeout (the run
may still be going; its thread is printed); 130 Ctrl-C (the run cancelled, or
left going).
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agents.build.artifact import bring_back
from agents.build.config import BuildConfig
from agents.build.ticket import MAX_TICKET_BYTES, TicketError, parse_ticket
from agents.build.ticket import title as ticket_title
from agents.intake.bounded import read_text
from agents.runticket import ticket_context
from agents.runtime.cancel import EXIT_CANCELLED
from agents.runtime.finaljson import final_json
from agents.runtime.ping import config_drift
from agents.runtime.waiting import Heartbeat, follow_run, require_listening
from room.errors import BullpenError

if TYPE_CHECKING:
    from agents.gateway.runbudgets import RunBudget
    from agents.home import Home

__all__ = [
    "EXIT_GREEN",
    "EXIT_INVALID",
    "EXIT_RED",
    "EXIT_WAIT",
    "FOREMAN",
    "build",
    "precheck",
    "progress_line",
]

FOREMAN = "foreman"
EXIT_GREEN, EXIT_RED, EXIT_INVALID, EXIT_WAIT = 0, 1, 2, 75
POLL_S = 25.0


class RestartNeeded(BullpenError):
    """The foreman runs on a society.toml older than the file: it must be restarted."""


def new_thread(now: datetime | None = None) -> str:
    day = (now or datetime.now(UTC)).strftime("%Y-%m-%d")
    return f"build-{day}-{secrets.token_hex(3)}"


def read_ticket(path: str) -> str:
    """The ticket's text; UsageError (exit 2) when it cannot be read as one: its size is
    checked before a byte is read (agents/intake/bounded.py)."""
    return read_text(Path(path).expanduser(), MAX_TICKET_BYTES, "the ticket")


def _first(text: str) -> str:
    lines = [" ".join(line.split()) for line in str(text).splitlines() if line.strip()]
    return lines[0][:200] if lines else ""


def progress_line(line: dict[str, Any]) -> str | None:
    """One plain line for an event of the run, or None for what is not news."""
    data = line.get("data") or {}
    sender = line.get("from")
    if data.get("kind") == "grind-iteration":
        return (
            f"step 4/4 grind: iteration {data.get('iteration')}, tier {data.get('tier')}: "
            f"{data.get('passing')}/{data.get('total')} passing, "
            f"{len(data.get('files_changed') or [])} files changed"
        )
    if sender == FOREMAN and line.get("type") == "ask":
        return f"{_first(line.get('body', ''))} -> {line.get('to')}"
    if sender == FOREMAN and line.get("type") == "reply" and not data.get("final"):
        return _first(line.get("body", ""))
    if line.get("type") == "reply" and line.get("to") == f"@{FOREMAN}":
        return f"  @{sender}: {_first(line.get('body', ''))}"
    return None


def exit_code(data: dict[str, Any]) -> int:
    if data.get("cancelled"):
        return EXIT_CANCELLED
    if data.get("invalid"):
        return EXIT_INVALID
    return EXIT_GREEN if data.get("green") else EXIT_RED


def precheck(home: Home, ticket: str) -> str | None:
    """The INVALID TICKET text for a ticket the foreman would refuse, or None: checked here
    first, so an invalid ticket leaves no ask and no run in the room."""
    try:
        parse_ticket(ticket, BuildConfig.of(home), frozenset(home.society.seats))
    except TicketError as exc:
        return f"INVALID TICKET — {exc}"
    return None


async def build(
    home: Home,
    ticket: str,
    *,
    wait_timeout: float = 4 * 3600.0,
    out: TextIO | None = None,
    err: TextIO | None = None,
    as_json: bool = False,
    budget: RunBudget | None = None,
) -> int:
    """Run one build through the foreman; the exit code (see the module docstring)."""
    out, err = out or sys.stdout, err or sys.stderr
    invalid = precheck(home, ticket)
    if invalid is not None:
        out.write(invalid + "\nnothing was posted; fix the ticket and run bullpen build again\n")
        out.flush()
        return EXIT_INVALID
    thread = new_thread()
    async with home.client(home.society.operator) as client:
        pong = await require_listening(client, FOREMAN)  # else nothing would ever answer
        drift = config_drift(home, FOREMAN, pong)
        if drift is not None:
            raise RestartNeeded(
                f"the running @{FOREMAN} checks tickets against the society.toml it started "
                f"with, not the one on disk, so it must be restarted first. {drift}. Nothing "
                "was posted; run bullpen build again after the restart"
            )
        stored = await client.say(
            f"@{FOREMAN}", f"build: {ticket_title(ticket)}", type="ask",
            data={"pipeline": "build", "ticket": ticket, **ticket_context(thread, budget)},
            thread=thread,
        )  # fmt: skip
        err.write(f"build {thread} asked of @{FOREMAN} (seq {stored.get('seq')})\n")
        err.flush()
        finals: list[dict[str, Any]] = []  # the final report's data, for the artifact

        async def follow(heartbeat: Heartbeat) -> int | None:
            try:
                async with asyncio.timeout(wait_timeout):
                    async for line in client.follow(
                        int(stored.get("seq", 0)), thread=thread, wait=POLL_S
                    ):
                        if not line.get("verified"):
                            continue
                        heartbeat.seen(line)
                        data = line.get("data") or {}
                        if (
                            line.get("from") == FOREMAN
                            and line.get("type") == "reply"
                            and data.get("final")
                        ):
                            code = exit_code(data)
                            finals.append(data)
                            said = str(line.get("body", "")).rstrip("\n")
                            out.write((final_json(thread, code, line) if as_json else said) + "\n")
                            out.flush()
                            if data.get("cancelled"):
                                err.write(f"the run {thread} was cancelled\n")
                            return code
                        note = progress_line(line)
                        if note:
                            err.write(note + "\n")
                            err.flush()
                            heartbeat.said()
            except TimeoutError:
                pass
            return None

        async def waited(heartbeat: Heartbeat) -> int:
            code = await follow(heartbeat)
            return EXIT_WAIT if code is None else code

        code = await follow_run(waited, client, thread, err, FOREMAN)
        if code == EXIT_GREEN and finals:  # where the green clone is on this host
            return await bring_back(home, finals[0], err)
        if code != EXIT_WAIT:
            return code
    err.write(
        f"no final report from @{FOREMAN} within {wait_timeout:g} s; the run may still be going: "
        f"its thread is {thread} (bullpen tail --thread {thread}). Check that the hub, the "
        "foreman, sandbox, testdesigner and the grinders are running\n"
    )
    return EXIT_WAIT

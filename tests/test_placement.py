"""Placement checked first: what a pong says about its lurker, and what is done with it.

Real hub, real lurkers: a pong names its host, boot and the SHA-256 of the society.toml
the lurker loaded; after society.toml is edited under a running foreman, `bullpen trust
check` flags it "restart needed", `bullpen build` refuses before posting, and the foreman's
own INVALID TICKET says a restart is needed rather than blaming the ticket.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.runtime.ping import ping
from tests.build.helpers import coder_seat, set_build, ticket
from tests.support import Proc, Society, run_cli, wait_for

KEEP = ("foreman", "echo")


def keep_only(root: Path, nicks: tuple[str, ...]) -> None:
    """Drop every [nicks.X] table but `nicks`': the live check then pings only those."""
    path = root / "society.toml"
    kept = "|".join(re.escape(nick) for nick in nicks)
    table = rf"^\[nicks\.(?!(?:{kept})\])[^\]]+\]\n(?:(?!\[).*\n?)*"
    path.write_text(re.sub(table, "", path.read_text(), flags=re.M))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def small(society: Society, tmp_path: Path) -> Iterator[tuple[Society, dict[str, Proc]]]:
    """A home with a foreman and an echo lurker running, and a build root in the test's
    folder."""
    keep_only(society.root, KEEP)
    set_build(society.root, root=str(tmp_path / "builds"), alias=str(tmp_path / "sandbox"))
    society.start_hub()
    procs = {nick: society.start_lurker(nick) for nick in KEEP}
    yield society, procs


def pongs(society: Society, nicks: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    async def go() -> dict[str, dict[str, Any]]:
        home = society.home
        async with home.client(home.society.operator) as client:
            return (await ping(client, nicks, 20)).pongs

    return asyncio.run(go())


def edit_society(society: Society) -> None:
    """An edit made while the lurkers run: a seat added (as an operator adds a tier)."""
    coder_seat(society.root, "newfix", "nothing")


def row_of(stdout: str, nick: str) -> str:
    return next(row for row in stdout.splitlines() if row.startswith(f"{nick} "))


def test_a_pong_names_its_host_boot_and_society(small: tuple[Society, dict[str, Proc]]) -> None:
    society, _ = small
    answered = pongs(society, KEEP)
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    for nick in KEEP:
        data = answered[nick]["data"]
        assert data["pong"] is True and data["nick"] == nick
        assert data["host"] == socket.gethostname()
        assert data["boot_id"] == boot
        assert data["society_sha256"] == sha256(society.root / "society.toml")


def test_trust_check_flags_a_lurker_started_before_society_toml_changed(
    small: tuple[Society, dict[str, Proc]],
) -> None:
    """Passes, then (society.toml edited) flags both lurkers, which loaded the old file, with
    the restart to run; the one restarted is no longer flagged. The society is shown per
    host."""
    society, procs = small
    done = run_cli(society.root, "trust", "check")
    assert done.returncode == 0, done.stdout + done.stderr
    host = socket.gethostname()
    assert f"society per host (1 host):\n  {host} (boot " in done.stdout
    assert re.search(rf"^  {re.escape(host)} \(boot \w+\): foreman, echo$", done.stdout, re.M)

    edit_society(society)
    done = run_cli(society.root, "trust", "check")
    assert done.returncode == 1, done.stdout + done.stderr
    for nick in KEEP:
        row = row_of(done.stdout, nick)
        assert f"restart needed: society.toml changed since {nick} started" in row
        assert f"systemctl --user restart bullpen-lurker@{nick}" in row and "bullpen up" in row
    assert "trust check FAILED: 2 nick(s)" in done.stderr

    procs["foreman"].stop()
    society.procs.remove(procs["foreman"])
    procs["foreman"] = society.start_lurker("foreman")
    done = run_cli(society.root, "trust", "check")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "restart needed" not in row_of(done.stdout, "foreman")  # the restarted one
    assert "restart needed" in row_of(done.stdout, "echo")  # still on the old file
    assert "trust check FAILED: 1 nick(s)" in done.stderr


def build_asks(society: Society) -> list[dict[str, Any]]:
    return [m for m in society.lines() if (m.get("data") or {}).get("pipeline") == "build"]


def test_bullpen_build_refuses_before_posting_when_the_foreman_predates_an_edit(
    small: tuple[Society, dict[str, Proc]], tmp_path: Path
) -> None:
    """A tier added to society.toml after the foreman started passes the command's own
    ticket check; the foreman's pong shows it runs the old file: nothing is posted."""
    society, _ = small
    edit_society(society)
    repo = tmp_path / "builds" / "calc"
    path = tmp_path / "ticket.md"
    path.write_text(ticket(str(repo), f"{repo}/tests/test_calc.py", tiers="newfix"))
    done = run_cli(society.root, "build", str(path), "--wait-timeout", "30")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "must be restarted" in done.stderr
    assert "restart needed: society.toml changed since foreman started" in done.stderr
    assert "Nothing was posted" in done.stderr and "Traceback" not in done.stderr
    assert build_asks(society) == []


def test_the_foremans_invalid_ticket_says_a_restart_is_needed(
    small: tuple[Society, dict[str, Proc]], tmp_path: Path
) -> None:
    """Posted straight to the foreman (as an older `bullpen build` would), a ticket naming a
    seat added since the foreman started is refused with the restart to run; a seat that
    is nowhere stays the ticket's own fault."""
    society, _ = small
    edit_society(society)
    repo = tmp_path / "builds" / "calc"
    finals = {}
    for tiers in ("newfix", "nosuchseat"):
        thread = f"build-test-{secrets.token_hex(4)}"
        text = ticket(str(repo), f"{repo}/tests/test_calc.py", tiers=tiers)

        async def say(text: str = text, thread: str = thread) -> None:
            home = society.home
            async with home.client(home.society.operator) as client:
                data = {"pipeline": "build", "ticket": text}
                await client.say("@foreman", "build", type="ask", data=data, thread=thread)

        asyncio.run(say())
        finals[tiers] = wait_for(
            lambda thread=thread: next(
                (
                    m
                    for m in society.lines()
                    if m.get("thread") == thread and (m.get("data") or {}).get("final")
                ),
                None,
            ),
            30,
            f"the foreman's report on tiers={tiers}",
        )
    body = finals["newfix"]["body"]
    assert body.startswith("INVALID TICKET — STEP 2 tiers= names newfix"), body
    assert "restart needed" in body and "[seats.newfix], added since @foreman started" in body
    assert "systemctl --user restart bullpen-lurker@foreman" in body
    assert finals["newfix"]["data"]["invalid"]
    assert "restart needed" not in finals["nosuchseat"]["body"]
    assert not repo.exists()

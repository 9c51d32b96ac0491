"""A build whose grinder runs on another host, with a build root of its own.

Host a runs the foreman, @sandbox and @testdesigner, and `bullpen build`; host b runs @py
alone. Each host's build root is at the same path, /tmp/bph-<tag>/build, and b's is empty:
@py cannot see the build dir @sandbox made on a, so it fetches the bundle @testdesigner
handed on through NATS's Object Store (on the cluster across the hosts), checked by hash,
and grinds on it; `bullpen build` on a fetches the green clone back the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import subprocess
import time
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.build.helpers import PY_FIX, PY_SPEC, coder_seat, set_build, ticket
from tests.hosts.netns import Host
from tests.hosts.society import HostHome, Spread
from tests.support import wait_for

pytestmark = [pytest.mark.timeout(300), pytest.mark.long]

BUCKET = "bullpen-objects"  # [objects] bucket's default


def campaign(spread: Spread, **env: str) -> Path:
    """The calc campaign in host a's build root and its ticket in a's home; every home's
    `fixer` code seat writes the fix in one change (`env`: more of its environment).
    Returns the ticket's path as host a sees it."""
    solution = spread.net.root / "fix"  # read by the seat on b: outside the hosts' own folders
    solution.mkdir()
    (solution / "calc.py").write_text(PY_FIX)
    seen = spread.net.seen_at("build")
    for home in spread.homes.values():
        set_build(home.root, root=str(seen), alias=str(spread.net.seen_at("sandbox")),
                  max_iterations=2, run_timeout_s=60)  # fmt: skip
        coder_seat(home.root, "fixer", "copy", FAKE_CODER_SOLUTION=str(solution), **env)
    a = spread.home("a")
    tests = a.host.own("build") / "calc" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_calc.py").write_text(PY_SPEC)
    folder = seen / "calc"
    (a.root / "calc-ticket.md").write_text(
        ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="fixer")
    )
    return a.path / "calc-ticket.md"


def start(spread: Spread) -> None:
    spread.up({"a": ("foreman", "sandbox", "testdesigner"), "b": ("py",)})
    spread.home("c").hub()


def runs(host: Host, program: str) -> bool:
    """Whether a process of `host` runs `program` (its command line names it)."""
    for pid in host.pids():
        with contextlib.suppress(OSError):
            if program.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
    return False


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True)
    return done.stdout.decode().strip()


def stored(home: HostHome, name: str) -> bytes:
    """An object's bytes as NATS holds them, read past bullpen's client."""

    async def read() -> bytes:
        nc = await nats.connect(home.home.society.room.servers, connect_timeout=5)
        try:
            bucket = await nc.jetstream().object_store(BUCKET)
            return bytes((await bucket.get(name)).data or b"")
        finally:
            await nc.close()

    return asyncio.run(read())


def test_a_grinder_on_another_host_goes_green_and_the_artifact_comes_back(
    spread: Spread,
) -> None:
    path = campaign(spread)
    start(spread)
    a, b = spread.home("a"), spread.home("b")
    assert not b.host.own("build").joinpath("calc").exists()  # b's build root is its own
    done = a.cli("build", str(path), "--wait-timeout", "200", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BUILD GREEN" in done.stdout

    thread = done.stderr.split("build ", 1)[1].split()[0]
    replies: dict[str, Any] = {
        (m["data"] or {}).get("kind") or m["from"]: m["data"]
        for m in spread.home("c").lines()
        if m.get("thread") == thread and m["type"] == "reply" and m.get("data")
    }
    spec, grind = replies["testdesigner"], replies["grind-result"]
    handoff, artifact = spec["handoff"], grind["artifact"]
    for handed in (handoff, artifact):  # named in the room, stored under their hash
        held = stored(a, handed["sha256"])
        assert hashlib.sha256(held).hexdigest() == handed["sha256"]
        assert len(held) == handed["bytes"]
    assert artifact["nick"] == "py" and artifact["step"] == "grind"

    # @py ground on b, on the bundle unpacked under b's own build root
    unpacked = b.host.own("build") / f"calc-{spec['baseline'][:12]}"
    assert git(unpacked, "rev-parse", "HEAD") == spec["baseline"]
    assert grind["build_dir"] == str(spread.net.seen_at("build") / unpacked.name)
    assert not a.host.own("build").joinpath(unpacked.name).exists()
    assert (a.host.own("build") / "calc" / "calc.py").read_text() == ""  # the stub stays

    # `bullpen build` on a fetched the green clone back, checked its hash, said where
    back = f"artifact-{artifact['commit'][:12]}"
    assert f"unpacked at {spread.net.seen_at('build') / back}" in done.stderr
    assert artifact["sha256"] in done.stderr and "SHA-256 verified" in done.stderr
    assert git(a.host.own("build") / back, "rev-parse", "HEAD") == artifact["commit"]
    assert (a.host.own("build") / back / "calc.py").read_text() == PY_FIX


def test_a_grinder_host_killed_mid_grind_ends_the_build_command_saying_so(
    spread: Spread,
) -> None:
    """Every process of host b dies while @py grinds (its code seat takes 8 s over the fix
    that would turn the build green): `bullpen build` on a does not wait in silence: it ends
    at its --wait-timeout (exit 75), its last step line naming @py, saying the run may still
    be going, its thread, and what to check. (The foreman's own overdue report for the grind
    comes only after [build] grind_timeout_s + 120 s, too long for this test.)"""
    path = campaign(spread, FAKE_CODER_SLEEP="8")
    start(spread)
    a = spread.home("a")
    run = a.spawn("build", "build", str(path), "--wait-timeout", "30")
    b = spread.home("b").host
    wait_for(lambda: runs(b, "fake_coder.py"), 90, "@py's code seat to run on host b")
    b.kill()
    killed_at = time.monotonic()

    wait_for(lambda: not run.alive(), 60, "bullpen build to end")
    assert time.monotonic() - killed_at < 30
    said = run.output().strip().splitlines()
    assert run.proc.returncode == 75, run.output()
    assert said[-2].startswith("step 4/4 grind: tests/test_calc.py") and "-> @py" in said[-2]
    assert said[-1].startswith("no final report from @foreman within 30 s; the run may still")
    assert "the grinders are running" in said[-1]
    assert not any(m["from"] == "py" for m in spread.home("c").lines())

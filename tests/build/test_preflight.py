"""Placement checked first: `bullpen build`'s pre-flight and the wrong-host failure.

Real hub, foreman and step lurkers, real git, pytest and bubblewrap. A "host" whose view
differs is made the way a split deployment differs: a lurker started with a PATH lacking
`go`, or a grinder started in its own mount namespace (bwrap) where the build root is a
different, empty folder. On one machine both sides carry the same host name, so the tests
compare the wording with what the room says (the pongs and the sandbox's reply).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents.build.preflight import place, same_place
from agents.runtime.ping import Pings, ask_each
from agents.runtime.preflight import KEY
from tests.build.helpers import (
    PY_FIX,
    PY_SPEC,
    build_command,
    coder_seat,
    lay_down,
    run_build,
    set_build,
    ticket,
)
from tests.support import Proc, Society, bullpen_argv, run_cli, wait_for
from tests.test_placement import keep_only, pongs

GO_SPEC_NAME = "calc_test.go"
STEP_NICKS = ("foreman", "sandbox", "testdesigner", "py")


@dataclass
class Home:
    society: Society
    base: Path
    builds: Path

    def campaign(self, slug: str, name: str, text: str) -> Path:
        return lay_down(self.builds, slug, {name: text})

    def build(
        self, text: str, wait: float = 120, *options: str
    ) -> subprocess.CompletedProcess[str]:
        return build_command(self.society, self.base, text, wait, *options)

    def build_asks(self) -> list[dict[str, Any]]:
        """Every ask of a build run posted to the foreman."""
        return [
            m
            for m in self.society.lines()
            if m["to"] == "@foreman" and (m.get("data") or {}).get("pipeline") == "build"
        ]

    def preflight_lines(self, thread_prefix: str = "preflight-") -> list[dict[str, Any]]:
        return [m for m in self.society.lines() if str(m.get("thread")).startswith(thread_prefix)]


def _home(base: Path, nicks: tuple[str, ...], toml: str = "") -> Home:
    society = Society(base / "home")
    if toml:  # before anything starts: no process runs an older society.toml
        path = society.root / "society.toml"
        path.write_text(path.read_text() + toml)
    keep_only(society.root, nicks)  # a live check pings these alone
    builds = base / "builds"
    builds.mkdir()
    solution = base / "solution"
    solution.mkdir()
    (solution / "calc.py").write_text(PY_FIX)
    set_build(
        society.root, root=str(builds), alias=str(base / "sandbox"), stall_after=2,
        max_iterations=2, run_timeout_s=60,
    )  # fmt: skip
    coder_seat(society.root, "pyfix", "copy", FAKE_CODER_SOLUTION=str(solution))
    coder_seat(society.root, "slowfix", "copy", FAKE_CODER_SLEEP="8",
               FAKE_CODER_SOLUTION=str(solution))  # fmt: skip
    society.start_hub()
    return Home(society, base, builds)


def _path_without_go(base: Path) -> str:
    """A PATH holding git, gofmt and bwrap but not go: a host where Go is not installed."""
    tools = base / "bin-without-go"
    tools.mkdir()
    for tool in ("git", "gofmt", "bwrap", "sh"):
        found = shutil.which(tool)
        assert found is not None, tool
        (tools / tool).symlink_to(found)
    assert shutil.which("go", path=str(tools)) is None
    return str(tools)


def _start(society: Society, nicks: tuple[str, ...], procs: list[Proc]) -> None:
    wait_for(lambda: all("lurking" in p.output() or not p.alive() for p in procs), 90, "lurkers")
    assert all(p.alive() for p in procs), "\n".join(p.output() for p in procs)


@pytest.fixture(scope="module")
def one_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    """Every build nick on this host as usual, but @godev, whose PATH lacks go."""
    base = tmp_path_factory.mktemp("preflight")
    home = _home(base, (*STEP_NICKS, "godev"))
    society = home.society
    procs = [society.spawn(f"lurk-{nick}", "lurk", nick) for nick in STEP_NICKS]
    procs.append(society.spawn("lurk-godev", "lurk", "godev", env={"PATH": _path_without_go(base)}))
    try:
        _start(society, (*STEP_NICKS, "godev"), procs)
        yield home
    finally:
        society.stop_all()


def test_the_preflight_passes_on_one_host_and_the_build_goes_green(one_host: Home) -> None:
    """`bullpen build` asks @sandbox, @testdesigner and @py before it posts: each answers
    itself, verified, naming this host and no problem; the command says what each sees
    and only then posts the ticket, which goes green."""
    folder = one_host.campaign("pycalc", "tests/test_calc.py", PY_SPEC)
    before = len(one_host.preflight_lines())
    done = one_host.build(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="pyfix"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BUILD GREEN" in done.stdout
    host = socket.gethostname()
    assert "pre-flight: asking @sandbox, @testdesigner, @py where they run" in done.stderr
    for nick in ("sandbox", "testdesigner", "py"):
        said = re.search(rf"^pre-flight ok: @{nick} on host (\S+), root (\S+),", done.stderr, re.M)
        assert said is not None, done.stderr
        assert said[1] == host and said[2] == str(one_host.builds.resolve())
    assert "REPO not a git repository yet" in done.stderr  # the sandbox scaffolds it after
    # the run's thread is still the first "build <thread>" said (scripts read it so)
    assert done.stderr.split("build ", 1)[1].split()[0].startswith("build-")
    lines = one_host.preflight_lines()[before:]
    asks = [m for m in lines if m["type"] == "ask"]
    answers = [m for m in lines if m["type"] == "reply"]
    assert sorted(m["to"] for m in asks) == ["@py", "@sandbox", "@testdesigner"]
    assert all(m["data"]["preflight"]["repo"] == str(folder) for m in asks)
    assert sorted(m["from"] for m in answers) == ["py", "sandbox", "testdesigner"]
    for answer in answers:
        data = answer["data"]
        assert answer["verified"] is True and answer["to"] == "@operator"
        assert data["host"] == host and data["problems"] == [] and data["checked"] is True
        assert data["tools"]["git"] is not None
    grinder = next(m["data"] for m in answers if m["from"] == "py")
    assert grinder["role"] == "grind" and grinder["found"] is True and grinder["commit"] is None
    build_ask = one_host.build_asks()[-1]
    assert build_ask["seq"] > max(m["seq"] for m in answers)  # posted only after the answers


def test_a_busy_grinder_answers_a_preflight_at_once(one_host: Home) -> None:
    """While @py grinds (its code seat takes 8 s), a pre-flight asked of it is answered
    within 4 s: a ping or a pre-flight takes no slot of the step, so a second build is not
    refused for a grinder that is only busy."""
    folder = one_host.campaign("slow", "tests/test_calc.py", PY_SPEC)
    path = one_host.base / "ticket-slow.md"
    path.write_text(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="slowfix"))
    root = one_host.society.root
    argv = bullpen_argv(root, "build", str(path), "--wait-timeout", "120")
    running = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        grind = wait_for(
            lambda: next((m for m in one_host.society.lines() if m["to"] == "@py"
                          and (m.get("data") or {}).get("repo") == str(folder)
                          and m["data"].get("step") == 4), None),
            90, "the grind ask",
        )  # fmt: skip

        async def ask() -> Pings:
            home = one_host.society.home
            request = {KEY: {"pipeline": "build", "language": "python", "repo": str(folder)}}
            async with home.client(home.society.operator) as client:
                return await ask_each(client, ["py"], "pre-flight", request, 4.0,
                                      label="preflight", verified_only=True)  # fmt: skip

        answered = asyncio.run(ask())
        final = [m for m in one_host.society.lines() if m.get("thread") == grind["thread"]
                 and (m.get("data") or {}).get("final")]  # fmt: skip
        assert "py" in answered.pongs and answered.pongs["py"]["data"]["problems"] == []
        assert final == []  # the grind was still going when it answered
    finally:
        out, err = running.communicate(timeout=150)
    assert running.returncode == 0, out + err


def test_trust_check_does_not_flag_build_nicks_that_share_the_root(one_host: Home) -> None:
    """Every build nick sees @sandbox's build root: the live check asks them (their answers
    are in the room) and flags no split."""
    before = len(one_host.preflight_lines("trust-check-"))
    done = run_cli(one_host.society.root, "trust", "check", "--live")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "split" not in done.stdout
    answers = [
        m for m in one_host.preflight_lines("trust-check-")[before:] if m["type"] == "reply"
        and (m.get("data") or {}).get("preflight")
    ]  # fmt: skip
    assert sorted(m["from"] for m in answers) == ["godev", "py", "sandbox", "testdesigner"]
    assert {m["data"]["root"] for m in answers} == {str(one_host.builds.resolve())}


class TestSamePlace:
    """Two nicks' views of a folder are one folder, or two."""

    def test_on_one_kernel_device_and_inode_decide(self, tmp_path: Path) -> None:
        """Same boot: the same inode is one folder, another folder is two, whatever the
        paths."""
        one, other = tmp_path / "a", tmp_path / "b"
        one.mkdir()
        other.mkdir()
        view = {"boot_id": "b1", "place": place(str(one))}
        assert same_place(view, {"boot_id": "b1", "place": place(str(one))})
        assert not same_place(view, {"boot_id": "b1", "place": place(str(other))})
        assert not same_place(view, {"boot_id": "b1", "place": None})

    def test_across_machines_inode_and_mtime_must_both_agree(self) -> None:
        """Another boot: a shared filesystem keeps inode and mtime; a local folder of the
        same inode number but another mtime is another folder."""
        here = {"boot_id": "b1", "place": {"dev": 1, "ino": 42, "mtime_ns": 7}}
        shared = {"boot_id": "b2", "place": {"dev": 9, "ino": 42, "mtime_ns": 7}}
        local = {"boot_id": "b2", "place": {"dev": 1, "ino": 42, "mtime_ns": 8}}
        assert same_place(here, shared) and not same_place(here, local)


def test_the_preflight_refuses_a_grinder_whose_host_lacks_go(one_host: Home) -> None:
    """@godev's PATH lacks go: `bullpen build` of a Go spec stops before posting, naming the
    nick, its host, what is missing and the fix; @testdesigner, which has go, is not named;
    the foreman is asked nothing."""
    folder = one_host.campaign("gocalc", GO_SPEC_NAME, "package calc\n")
    asks = len(one_host.build_asks())
    done = one_host.build(ticket(str(folder), f"{folder}/{GO_SPEC_NAME}", grinder="@godev"))
    assert done.returncode == 1, done.stdout + done.stderr
    host = socket.gethostname()
    err = done.stderr
    assert "pre-flight: asking @sandbox, @testdesigner, @godev" in err
    assert "pre-flight FAILED" in err and "Nothing was posted to the foreman" in err
    problem = next(line for line in err.splitlines() if line.startswith("  - @godev"))
    assert problem.startswith(f"  - @godev on host {host}: go is not found on its PATH")
    assert f"Fix: install it on host {host} (e.g. apt install golang-go)" in problem
    assert "bullpen-lurker@godev" in problem
    assert not [line for line in err.splitlines() if line.startswith("  - @testdesigner")]
    assert "Traceback" not in err
    assert len(one_host.build_asks()) == asks
    answer = next(
        m for m in reversed(one_host.preflight_lines()) if m["from"] == "godev"
    )  # the room holds its answer: the tools it found, go not among them
    assert answer["verified"] and answer["data"]["tools"]["go"] is None
    assert answer["data"]["tools"]["gofmt"] is not None


def test_the_preflight_says_what_it_waits_for_and_refuses_a_nick_that_never_answers(
    one_host: Home,
) -> None:
    """@jsdev runs nowhere: while the pre-flight waits, a line says on whom; at the end it
    refuses, saying how to start the nick, and the foreman is asked nothing."""
    folder = one_host.campaign("jscalc", "calc.test.js", "const test = require('node:test');\n")
    asks = len(one_host.build_asks())
    text = ticket(str(folder), f"{folder}/calc.test.js", grinder="@jsdev")
    done = one_host.build(text, 60, "--preflight-timeout", "7")
    assert done.returncode == 1, done.stdout + done.stderr
    err = done.stderr
    assert re.search(r"^… pre-flight: still waiting on @jsdev \(\d+ s\)$", err, re.M), err
    assert "waiting on @sandbox" not in err and "waiting on @testdesigner" not in err
    assert "  - @jsdev did not answer the pre-flight within 7 s (no verified answer)" in err
    assert "systemctl --user start bullpen-lurker@jsdev" in err
    assert "Nothing was posted to the foreman" in err
    assert len(one_host.build_asks()) == asks


def test_the_preflight_refuses_a_repo_the_sandbox_cannot_see(one_host: Home) -> None:
    """REPO does not exist where @sandbox runs: refused before posting, by the step's own
    rule, named with the sandbox's host and how to make the folder there."""
    folder = one_host.builds / "never-made"
    asks = len(one_host.build_asks())
    done = one_host.build(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="pyfix"))
    assert done.returncode == 1, done.stdout + done.stderr
    host = socket.gethostname()
    assert (
        f"  - @sandbox on host {host}: REPO {folder} ({folder.resolve()}) is not a folder on "
        f"host {host}: DIR NOT FOUND. Create it on this host (mkdir -p"
    ) in done.stderr, done.stderr
    assert len(one_host.build_asks()) == asks and not folder.exists()


def _split(tmp_path: Path, nick: str, toml: str = "") -> Iterator[Home]:
    """`nick` in its own mount namespace, where the build root is another, empty folder."""
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap (bwrap) is needed: apt install bubblewrap")
    home = _home(tmp_path, STEP_NICKS, toml)
    society = home.society
    procs = [society.spawn(f"lurk-{n}", "lurk", n) for n in STEP_NICKS if n != nick]
    elsewhere = tmp_path / "another-host-root"
    elsewhere.mkdir()
    logs = society.root / "test-logs"
    argv = ["bwrap", "--dev-bind", "/", "/", "--bind", str(elsewhere), str(home.builds),
            *bullpen_argv(society.root, "lurk", nick)]  # fmt: skip
    apart = Proc(argv, logs / f"lurk-{nick}.log")
    society.procs.append(apart)
    procs.append(apart)
    try:
        _start(society, STEP_NICKS, procs)
        yield home
    finally:
        society.stop_all()


@pytest.fixture
def split(tmp_path: Path) -> Iterator[Home]:
    """@py apart: its build dir must come to it through the object store."""
    yield from _split(tmp_path, "py")


@pytest.fixture
def split_designer(tmp_path: Path) -> Iterator[Home]:
    """@testdesigner apart: it would write the spec into a build dir it cannot see."""
    yield from _split(tmp_path, "testdesigner")


@pytest.fixture
def split_small_store(tmp_path: Path) -> Iterator[Home]:
    """@py apart, with objects bounded at 1 KiB: no build dir can be handed on to it."""
    yield from _split(tmp_path, "py", "\n[objects]\nmax_bytes = 1024\n")


def test_a_split_designer_is_refused_by_the_preflight_and_flagged_by_trust_check(
    split_designer: Home,
) -> None:
    """@testdesigner sees another folder at the build root: `bullpen build` names both nicks
    and hosts and posts nothing; `bullpen trust check --live` flags the split."""
    split = split_designer
    folder = split.campaign("calc", "tests/test_calc.py", PY_SPEC)
    done = split.build(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="pyfix"))
    assert done.returncode == 1, done.stdout + done.stderr
    host = socket.gethostname()
    root = str(split.builds.resolve())
    said = (
        f"@testdesigner on host {host} does not see the build root {root} that @sandbox sees "
        f"on host {host}: another folder (both hosts are named {host}"
    )
    assert said in done.stderr and "Nothing was posted to the foreman" in done.stderr
    assert "@py on host" not in done.stderr
    assert split.build_asks() == []
    checked = run_cli(split.society.root, "trust", "check", "--live")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert f"problem: build nicks split with no shared store: {said}" in checked.stdout


def test_a_split_grinder_passes_the_preflight_and_its_build_dir_travels(split: Home) -> None:
    """@py sees another folder at the build root: the pre-flight lets it be (its build dir
    comes to it as a bundle through the object store), the build goes green, and trust
    check flags no split."""
    folder = split.campaign("calc", "tests/test_calc.py", PY_SPEC)
    done = split.build(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="pyfix"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BUILD GREEN" in done.stdout
    checked = run_cli(split.society.root, "trust", "check", "--live")
    assert "build nicks split" not in checked.stdout, checked.stdout


def test_a_wrong_host_grind_names_both_sides_of_the_boundary(split_small_store: Home) -> None:
    """Posted to the foreman without the pre-flight (as an older `bullpen build` would), with
    a build dir too big for the object store's bound: the sandbox makes it on its host, the
    spec step cannot hand it on, the grinder cannot see it, and its failure names which nick
    on which host could not see what, and which nick on which host made it, as the room
    says; it no longer tells the operator to create the folder."""
    split = split_small_store
    folder = split.campaign("calc", "tests/test_calc.py", PY_SPEC)
    (folder / "data.bin").write_bytes(os.urandom(8192))  # a bundle past the 1 KiB bound
    text = ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="pyfix")
    body, data, thread = run_build(split.society, text, 120)
    assert data["green"] is False and "GRIND FAILED" in body, body
    lines = [m for m in split.society.lines() if m.get("thread") == thread]
    made = next(m for m in lines if m["from"] == "sandbox" and m["type"] == "reply")
    failed = next(m for m in lines if m["from"] == "py" and m["type"] == "reply")
    maker_host = made["data"]["host"]
    py_host = pongs(split.society, ("py",))["py"]["data"]["host"]  # as its pong names it
    real = os.path.realpath(folder)
    reason = failed["data"]["reason"]
    assert reason.startswith(
        f"HOST BOUNDARY: @py on host {py_host} cannot see the build dir {real} (REPO {folder}): "
        f"it was made by @sandbox on host {maker_host} (baseline {made['data']['baseline'][:12]})"
    ), reason
    assert "Do not create it here" in reason and "mkdir -p" not in reason
    assert "Placement checked first" in reason
    assert "HOST BOUNDARY: @py on host" in body  # the operator's report carries it
    assert (folder / ".git").is_dir()  # the build dir the sandbox made, on its side

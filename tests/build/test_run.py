"""Builds through the room: real hub, foreman and step lurkers, git, pytest, go test, node.

One society for the module; each test lays down its own build dir under the shared
build root and runs `bullpen build TICKET.md` as an operator would.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents.build.fence import BWRAP, choose
from tests.build.helpers import (
    GAME_FIX,
    GAME_SPEC,
    GO_FIX,
    GO_SPEC,
    JS_FIX,
    JS_SPEC,
    PY_FIX,
    PY_SPEC,
    build_command,
    coder_seat,
    lay_down,
    set_build,
    ticket,
)
from tests.support import Proc, Society, run_cli, wait_for

NICKS = ("foreman", "sandbox", "testdesigner", "py", "godev", "jsdev")
FENCE = choose("auto")  # the home's [build] fence is "auto": the seats get the same
SEAT_FENCE = "bwrap" if FENCE == BWRAP else "none"


@dataclass
class House:
    society: Society
    base: Path
    builds: Path
    alias: Path
    procs: dict[str, Proc]

    def campaign(self, slug: str, files: dict[str, str]) -> Path:
        return lay_down(self.builds, slug, files)

    def build(self, text: str, wait: float = 120) -> subprocess.CompletedProcess[str]:
        return build_command(self.society, self.base, text, wait)

    def thread_of(self, done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
        return self.thread(done.stderr.split("build ", 1)[1].split()[0])

    def thread(self, thread: str) -> list[dict[str, Any]]:
        return [m for m in self.society.lines() if m.get("thread") == thread]

    def post(self, text: str) -> str:
        """Ask the foreman for a build as `bullpen build` does, without a process: the thread."""
        thread = f"build-test-{secrets.token_hex(4)}"

        async def say() -> None:
            home = self.society.home
            async with home.client(home.society.operator) as client:
                data = {"pipeline": "build", "ticket": text}
                await client.say("@foreman", "build", type="ask", data=data, thread=thread)

        asyncio.run(say())
        return thread

    def run(self, text: str, wait: float = 120) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
        """Post a build and wait for its final report: (its body, its data, the thread)."""
        thread = self.post(text)
        final = wait_for(lambda: _final_of(self.thread(thread)), wait, "the build's final report")
        return final["body"], final["data"], self.thread(thread)


def _final_of(lines: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next(
        (m for m in lines if m["from"] == "foreman" and (m.get("data") or {}).get("final")), None
    )


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> Iterator[House]:
    base = tmp_path_factory.mktemp("build")
    society = Society(base / "home")
    builds, alias = base / "builds", base / "sandbox"
    builds.mkdir()
    solutions = base / "solutions"
    for lang, name, text in (
        ("py", "calc.py", PY_FIX),
        ("go", "calc.go", GO_FIX),
        ("js", "calc.js", JS_FIX),
        ("web", "game.js", GAME_FIX),
    ):
        (solutions / lang).mkdir(parents=True)
        (solutions / lang / name).write_text(text)
    set_build(
        society.root, root=str(builds), alias=str(alias), stall_after=2, max_iterations=3,
        run_timeout_s=60,
    )  # fmt: skip
    logs = base / "logs"  # the seats' logs, outside the clone: the default fence allows it
    logs.mkdir()
    for lang in ("py", "go", "js", "web"):
        coder_seat(society.root, f"{lang}fix", "copy",
                   FAKE_CODER_SOLUTION=str(solutions / lang),
                   FAKE_CODER_LOG=str(logs / f"{lang}fix.log"))  # fmt: skip
    coder_seat(society.root, "dud", "nothing")
    coder_seat(society.root, "hang", "hang", timeout_s=1.5)
    coder_seat(society.root, "escape", "escape", FAKE_CODER_ESCAPE=str(alias / "escaped.txt"))
    coder_seat(society.root, "deleter", "delete-spec")
    (base / "spec.py").write_text(PY_SPEC)
    coder_seat(society.root, "testdesign", "answer", FAKE_ANSWER_PATH="tests/test_calc.py",
               FAKE_ANSWER_FILE=str(base / "spec.py"))  # fmt: skip
    coder_seat(society.root, "slowfix", "copy", FAKE_CODER_SLEEP="3",
               FAKE_CODER_SOLUTION=str(solutions / "py"))  # fmt: skip
    society.start_hub()
    procs = [society.spawn(f"lurk-{nick}", "lurk", nick) for nick in NICKS]  # started together
    wait_for(
        lambda: all("lurking" in p.output() or not p.alive() for p in procs), 60, "the lurkers"
    )
    assert all(p.alive() for p in procs), "\n".join(p.output() for p in procs)
    try:
        yield House(society, base, builds, alias, dict(zip(NICKS, procs, strict=True)))
    finally:
        society.stop_all()


def _final(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return next(
        m["data"] for m in lines if m["from"] == "foreman" and (m.get("data") or {}).get("final")
    )


def test_a_python_spec_goes_green_through_a_code_seat(house: House) -> None:
    """The operator's spec, a scaffolded stub, a fake code seat that writes the fix: green in
    the clone; the build dir keeps the stub; the baseline commit is the diff boundary."""
    folder = house.campaign("pycalc", {"tests/test_calc.py": PY_SPEC})
    done = house.build(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="pyfix"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BUILD GREEN" in done.stdout and "tier pyfix" in done.stdout
    assert "step 2/4" in done.stderr and "iteration 1, tier pyfix: 2/2 passing" in done.stderr
    lines = house.thread_of(done)
    # The run is titled by its problem, not by the ticket's first header ("build: PROBLEM").
    assert lines[0]["body"] == "build: Adding two numbers gives nothing at all."
    report = _final(lines)
    assert {k: report[k] for k in ("kind", "green", "tier", "passing", "total")} == {
        "kind": "build-report", "green": True, "tier": "pyfix", "passing": 2, "total": 2,
    }  # fmt: skip
    assert report["iterations"] == {"pyfix": 1}
    assert report["seat_fence"] == {"pyfix": SEAT_FENCE}
    assert f"fence: {FENCE}" in done.stdout and f"seat fence: pyfix {SEAT_FENCE}" in done.stdout
    clone = Path(report["clone"])
    assert clone.parent == house.builds.resolve() and clone.name.startswith("grind-")
    assert (clone / "calc.py").read_text() == PY_FIX
    assert (folder / "calc.py").read_text() == ""  # the stub stays
    assert _git(folder, "status", "--porcelain") == ""
    baseline = report["baseline"]
    assert _git(folder, "rev-parse", "HEAD") == baseline
    assert not (clone / ".git").exists()  # the history lies beside it: the report names it
    assert report["gitdir"] == f"{clone}.git"
    assert _git(clone, "--git-dir", report["gitdir"], "diff", "--name-only", baseline, "HEAD") == (
        "calc.py"
    )
    iterations = [
        m["data"] for m in lines if (m.get("data") or {}).get("kind") == "grind-iteration"
    ]
    assert len(iterations) == 1
    keys = ("tier", "iteration", "passing", "total", "files_changed", "seat_fence")
    assert {k: iterations[0][k] for k in keys} == {
        "tier": "pyfix", "iteration": 1, "passing": 2, "total": 2, "files_changed": ["calc.py"],
        "seat_fence": SEAT_FENCE,
    }  # fmt: skip
    seat_call = json.loads((house.base / "logs/pyfix.log").read_text().splitlines()[-1])
    assert seat_call["cwd"] == str(clone)
    assert seat_call["spec"] == str(clone / "tests/test_calc.py")
    assert seat_call["tier"] == "pyfix" and seat_call["iteration"] == "1"
    assert seat_call["prompt_has_spec"] and seat_call["first_line"] == "step: code"
    assert house.alias.resolve() == folder.resolve()


def test_a_go_spec_goes_green(house: House) -> None:
    """A `_test.go` spec is routed to @godev and ground with `go test` to green."""
    folder = house.campaign("gocalc", {"calc_test.go": GO_SPEC})
    text = ticket(str(folder), f"{folder}/calc_test.go", grinder="@godev", tiers="gofix")
    body, report, _ = house.run(text)
    assert (report["green"], report["tier"], report["passing"], report["total"]) == (
        True, "gofix", 2, 2,
    ), body  # fmt: skip
    assert (Path(report["clone"]) / "calc.go").read_text() == GO_FIX
    assert (folder / "calc.go").read_text() == "package calc\n"  # the stub keeps its package
    assert (folder / "go.mod").is_file()


def test_a_js_spec_goes_green(house: House) -> None:
    """A `.test.js` spec is routed to @jsdev and ground with `node --test` to green."""
    folder = house.campaign("jscalc", {"calc.test.js": JS_SPEC})
    text = ticket(str(folder), f"{folder}/calc.test.js", grinder="@jsdev", tiers="jsfix")
    body, report, _ = house.run(text)
    assert (report["green"], report["tier"], report["passing"], report["total"]) == (
        True, "jsfix", 2, 2,
    ), body  # fmt: skip
    assert (Path(report["clone"]) / "calc.js").read_text() == JS_FIX
    assert (folder / "calc.js").read_text() == ""


def test_a_canvas_game_goes_green_through_jsdev_in_a_headless_browser(house: House) -> None:
    """A `.test.html` page is routed to @jsdev; the stub its <script src> names leaves the
    canvas blank (red), and the seat's game draws in headless Chromium (green)."""
    folder = house.campaign("paddle", {"game.test.html": GAME_SPEC})
    text = ticket(str(folder), f"{folder}/game.test.html", grinder="@jsdev", tiers="webfix")
    body, report, lines = house.run(text, wait=240)
    assert (report["green"], report["tier"], report["passing"], report["total"]) == (
        True, "webfix", 2, 2,
    ), body  # fmt: skip
    checked = next(m for m in lines if m["from"] == "testdesigner")
    assert (checked["data"]["passing"], checked["data"]["total"]) == (0, 2)  # blank: red
    assert (
        next(m for m in lines if m["type"] == "ask" and m["data"].get("key") == "grind")["to"]
        == "@jsdev"
    )
    assert (Path(report["clone"]) / "game.js").read_text() == GAME_FIX
    assert (folder / "game.js").read_text() == ""


def test_a_stalled_floor_climbs_to_the_ceiling_and_a_misrouted_ticket_is_routed(
    house: House,
) -> None:
    """The floor changes nothing for stall_after iterations, the ceiling writes the fix; the
    ticket names @godev for a Python spec, and @py grinds it, as the report says."""
    folder = house.campaign("climb", {"tests/test_calc.py": PY_SPEC})
    spec = f"{folder}/tests/test_calc.py"
    body, report, lines = house.run(ticket(str(folder), spec, grinder="@godev", tiers="dud,pyfix"))
    assert report["green"] and report["tier"] == "pyfix", body
    assert report["iterations"] == {"dud": 2, "pyfix": 1}
    assert "routed: the ticket named @godev" in body and "@py ground it" in body
    grind_ask = next(m for m in lines if m["type"] == "ask" and m["data"].get("key") == "grind")
    assert grind_ask["to"] == "@py"
    climb = [(m["data"]["tier"], m["data"]["passing"]) for m in lines
             if (m.get("data") or {}).get("kind") == "grind-iteration"]  # fmt: skip
    assert climb == [("dud", 0), ("dud", 0), ("pyfix", 2)]


def test_a_ladder_of_local_seats_fails_loud_at_once(house: House) -> None:
    """No tiers in the ticket and none standing: GRIND FAILED says what to configure; the
    command exits 1."""
    folder = house.campaign("nolocal", {"tests/test_calc.py": PY_SPEC})
    clones = set(house.builds.glob("grind-*"))
    done = house.build(ticket(str(folder), f"{folder}/tests/test_calc.py"))
    assert done.returncode == 1
    assert (
        "[GRIND FAILED — no code-writing seat: set tiers or [build] tiers to a model seat, "
        "see docs/build.md]" in done.stdout
    )
    assert set(house.builds.glob("grind-*")) == clones  # nothing was cloned
    report = _final(house.thread_of(done))
    assert report["kind"] == "build-report" and report["green"] is False and report["tier"] is None


def test_a_spec_green_against_the_stub_is_flagged(house: House) -> None:
    folder = house.campaign("vacuous", {"tests/test_true.py": "def test_nothing():\n    pass\n"})
    body, report, lines = house.run(
        ticket(str(folder), f"{folder}/tests/test_true.py", tiers="pyfix")
    )
    assert body.startswith("[SPEC FAILED — ") and "green against the stub" in body
    assert report["green"] is False
    assert not any(m["type"] == "ask" and m["to"] == "@py" for m in lines)


def test_a_spec_the_runner_cannot_collect_is_flagged(house: House) -> None:
    folder = house.campaign("broken", {"tests/test_calc.py": "def test_add(:\n    pass\n"})
    body, _, _ = house.run(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="pyfix"))
    assert body.startswith("[SPEC FAILED — the runner cannot collect the spec"), body


ESCAPE_SAYS = (  # behind bwrap the write fails in the seat; without, the grind catches it
    "code seat escape tried to write outside the clone"
    if FENCE == BWRAP
    else "code seat escape wrote outside the clone"
)


@pytest.mark.parametrize(
    ("seat", "says"),
    [
        ("escape", ESCAPE_SAYS),
        ("deleter", "code seat deleter deleted the spec tests/test_calc.py"),
        ("hang", "code seat hang hung"),
    ],
)
def test_a_code_seat_that_breaks_a_rule_is_caught(house: House, seat: str, says: str) -> None:
    folder = house.campaign(f"rule-{seat}", {"tests/test_calc.py": PY_SPEC})
    body, report, _ = house.run(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers=seat))
    assert body.startswith("BUILD RED") and says in body, body
    assert any(says in problem for problem in report["problems"])
    clone = Path(report["clone"])
    assert (clone / "tests/test_calc.py").read_text() == PY_SPEC  # restored, never lost
    if seat == "escape" and FENCE == BWRAP:
        assert "Read-only file system" in body and not (folder / "escaped.txt").exists()
        assert _git(folder, "status", "--porcelain") == ""  # the build dir is untouched
    if seat == "hang":
        assert report["iterations"] == {"hang": 2}  # it stalled, then the ladder ended


def test_the_testdesign_seat_writes_an_absent_spec(house: House) -> None:
    """No spec at the test path: the testdesign seat writes it (JSON files, confined to the
    build dir), it is committed and checked red, and the grind goes green on top of it."""
    folder = house.campaign("designed", {"README": "a calculator\n"})
    spec = f"{folder}/tests/test_calc.py"
    body, report, lines = house.run(ticket(str(folder), spec, tiers="pyfix", targets="calc.py"))
    assert report["green"], body
    checked = next(m for m in lines if m["from"] == "testdesigner")
    assert checked["data"]["written_by"] == "testdesign" and checked["data"]["total"] == 2
    assert (folder / "tests/test_calc.py").read_text() == PY_SPEC
    assert _git(folder, "log", "-1", "--format=%s").startswith("spec: tests/test_calc.py")
    assert report["baseline"] == _git(folder, "rev-parse", "HEAD")  # the spec's commit


INVALID = {
    "missing": (dict(drop="TRAPS"), "the section TRAPS is missing"),
    "order": ("swap", "the sections are out of order"),
    "no-spec": ("nospec", "STEP 2 has no SPEC: <absolute path>"),
    "spec-outside": ("outside", "does not lie in REPO"),
    "repo-outside": ("elsewhere", "lies outside the build root"),
    "home": ("home", "lies under /home"),
}


def _invalid(house: House, case: str) -> str:
    folder = house.builds / "never"
    spec = f"{folder}/tests/test_calc.py"
    how = INVALID[case][0]
    if isinstance(how, dict):
        return ticket(str(folder), spec, **how)
    text = ticket(str(folder), spec, tiers="pyfix")
    if how == "swap":
        return (
            text.replace("REPO\n", "TEMP\n")
            .replace("TRAPS\n", "REPO\n")
            .replace("TEMP\n", "TRAPS\n")
        )
    if how == "nospec":
        return text.replace(f"SPEC: {spec}", f"the spec is {spec}")
    if how == "outside":
        return text.replace(f"SPEC: {spec}", f"SPEC: {house.builds}/other/test_calc.py")
    if how == "elsewhere":
        return text.replace(str(folder), "/tmp/elsewhere/campaign")
    return text.replace(str(folder), "/home/someone/campaign")


def test_invalid_tickets_dispatch_nothing_and_write_nothing(house: House) -> None:
    """Each INVALID TICKET case posted straight to the foreman ends the run at once: no ask
    to any step, no file written."""
    before = sorted(house.builds.rglob("*"))
    threads = {case: house.post(_invalid(house, case)) for case in INVALID}
    for case, thread in threads.items():
        final = wait_for(lambda t=thread: _final_of(house.thread(t)), 30, f"the {case} report")
        assert final["body"].startswith("INVALID TICKET — "), final["body"]
        assert INVALID[case][1] in final["body"], (case, final["body"])
        assert final["data"]["invalid"] and final["data"]["kind"] == "build-report"
        asks = [m for m in house.thread(thread) if m["from"] == "foreman" and m["type"] == "ask"]
        assert asks == [], case
    assert sorted(house.builds.rglob("*")) == before
    assert not (house.builds / "never").exists()


def test_bullpen_build_refuses_an_invalid_ticket_before_posting_anything(house: House) -> None:
    """`bullpen build` checks the ticket as the foreman would: exit 2 with what is wrong, and
    the room gains no line (no ask, no run); a tier naming no seat is one such ticket."""
    spec = f"{house.builds}/never/tests/test_calc.py"
    cases = {
        "home": (_invalid(house, "home"), "REPO /home/someone/campaign lies under /home"),
        "tiers": (ticket(f"{house.builds}/never", spec, tiers="pyfix,nosuchseat"),
                  "tiers= names nosuchseat, which no [seats.<name>] table configures"),
        "regression": (ticket(f"{house.builds}/never", spec, tiers="pyfix")
                       .replace(", no regression.", "."), "no no-regression clause"),
    }  # fmt: skip
    for case, (text, says) in cases.items():
        lines = len(house.society.lines())
        done = house.build(text, wait=20)
        assert done.returncode == 2, (case, done.stdout + done.stderr)
        assert done.stdout.startswith("INVALID TICKET — ") and says in done.stdout, done.stdout
        assert "nothing was posted" in done.stdout and "Traceback" not in done.stderr
        assert len(house.society.lines()) == lines, case
    assert not (house.builds / "never").exists()


def test_a_restarted_foreman_carries_on_from_the_thread(house: House) -> None:
    """The foreman is stopped while the grinder grinds and started again: the new process,
    with nothing but the thread, reports the green."""
    folder = house.campaign("restart", {"tests/test_calc.py": PY_SPEC})
    thread = house.post(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="slowfix"))
    wait_for(
        lambda: any(m["type"] == "ask" and m["to"] == "@py" for m in house.thread(thread)),
        60,
        "the grind ask",
    )
    house.procs["foreman"].stop()
    assert _final_of(house.thread(thread)) is None  # the grinder is still at work
    society = house.society
    house.procs["foreman"] = society.start_lurker("foreman")
    final = wait_for(lambda: _final_of(house.thread(thread)), 60, "the report after the restart")
    assert final["data"]["green"] and final["data"]["tier"] == "slowfix"
    reports = [m for m in house.thread(thread) if m["from"] == "foreman" and m["data"].get("final")]
    assert len(reports) == 1


def test_a_builds_trace_has_its_grind_iterations_and_fenced_test_runs(house: House) -> None:
    """`bullpen trace` of a green build: a span per grind iteration under the grinder's step,
    each with its fenced test run inside it, every span naming its room seq (issue 36)."""
    folder = house.campaign("pytrace", {"tests/test_calc.py": PY_SPEC})
    done = house.build(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="pyfix"))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = house.thread_of(done)
    traced = run_cli(house.society.root, "trace", lines[0]["thread"], "--json", timeout=60)
    assert traced.returncode == 0, traced.stderr
    spans = json.loads(traced.stdout)
    by_id = {s["span_id"]: s for s in spans}
    (iteration,) = [s for s in spans if s["name"] == "grind iteration 1"]
    announced = {m["seq"]: m for m in lines}[iteration["attributes"]["bullpen.room.seq"]]
    assert announced["data"]["kind"] == "grind-iteration"
    assert by_id[iteration["parent_id"]]["attributes"]["bullpen.nick"] == "py"
    (test_run,) = [s for s in spans if s["name"] == "fenced test run"]
    assert test_run["parent_id"] == iteration["span_id"]
    assert iteration["start_ns"] <= test_run["start_ns"] <= test_run["end_ns"]
    assert test_run["end_ns"] == iteration["end_ns"]
    assert test_run["attributes"]["bullpen.test.passing"] == 2

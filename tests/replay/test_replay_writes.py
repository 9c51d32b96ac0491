"""Replays of steps that write files: a backpass's and a build's, each against a private copy.

Each run is real (hub, foreman, lurkers, git); the society is stopped before the replay so
nothing but the replay could touch a file, and then the room and every file under the home
(and the build root and its alias) are hashed before and after: a replay writes only in its
copy, and its --json shows the replayed answer and what it wrote there.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.build.helpers import PY_FIX, PY_SPEC, coder_seat, set_build, ticket
from tests.replay.conftest import tree
from tests.support import BACKPASS_LURKERS, Society, run_cli, start_up

BUILD_NICKS = ("foreman", "sandbox", "testdesigner", "py")


def replay(root: Path, thread: str, key: str) -> dict:
    done = run_cli(root, "replay", thread, "--step", key, "--json", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return dict(json.loads(done.stdout))


def keys(root: Path, thread: str) -> list[str]:
    done = run_cli(root, "replay", thread, "--list", "--json")
    assert done.returncode == 0, done.stderr
    return [row["key"] for row in json.loads(done.stdout)]


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True
    ).stdout


def recorded_backpass(tmp_path: Path) -> tuple[Society, str]:
    """The sample backpass run with the built-in seats, its society stopped: the home, and
    the run's thread."""
    society = Society(tmp_path / "home", demo=True)
    up = start_up(society, nicks=BACKPASS_LURKERS)
    try:
        done = run_cli(society.root, "backpass", timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        up.stop()
    match = re.search(r"\b(backpass-\d{4}-\d{2}-\d{2}-[0-9a-f]+)\b", done.stdout + done.stderr)
    assert match, done.stdout + done.stderr
    return society, match.group(1)


def test_backpass_steps_replay_in_a_copy_and_leave_the_home_byte_identical(
    tmp_path: Path,
) -> None:
    """The sample backpass run with the built-in seats; then its ledger and synthesis steps
    replayed: both answer as in the run (the synthesis commits a branch in the copy of the
    memory repository), and not one byte of the room, the memory repositories' git stores,
    the run folder or any other file of the home changed."""
    society, thread = recorded_backpass(tmp_path)
    root = society.root
    steps = keys(root, thread)
    assert steps[:2] == ["list", "analysis/1"], steps
    ledger = next(k for k in steps if "ledger" in k)
    synthesis = next(k for k in steps if "synth" in k)
    private = root / "memory" / "private"
    branches = git(private, "branch", "--list")
    before = tree(root)
    for key in ("list", "analysis/1", ledger, synthesis):
        result = replay(root, thread, key)
        assert result["step"] == key and result["gates"]["replayed"]["pass"] is True, result
        recorded, replayed = result["recorded"]["data"], result["replayed"]["data"]
        copy = result["copy"]
        assert copy["files"] > 0 and copy["bytes"] > 0
        written = [
            p for change in ("created", "changed", "rewritten") for p in copy["written"][change]
        ]
        assert written, copy
        assert all(path.startswith(str(root.resolve())) for path in written), written
        assert all("bullpen-replay-copy" not in json.dumps(v) for v in (replayed, written))
        # the same inputs, the same deterministic seats: the same kind of answer as the run
        assert sorted(replayed) == sorted(recorded), (recorded, replayed)
    only = {c.get("only") for c in copy["copied"]}
    assert any(o and thread in o for o in only), copy["copied"]  # the run's folder, not all runs
    assert any(".git" in path for path in written)  # a commit or branch, in the copy's repo
    assert tree(root) == before
    assert git(private, "branch", "--list") == branches


@pytest.fixture
def build_home(tmp_path: Path) -> tuple[Society, Path, Path]:
    society = Society(tmp_path / "home")
    builds, alias = tmp_path / "builds", tmp_path / "sandbox"
    builds.mkdir()
    solution = tmp_path / "solution"
    solution.mkdir()
    (solution / "calc.py").write_text(PY_FIX)
    set_build(
        society.root, root=str(builds), alias=str(alias), stall_after=2, max_iterations=2,
        run_timeout_s=60,
    )  # fmt: skip
    coder_seat(society.root, "pyfix", "copy", FAKE_CODER_SOLUTION=str(solution))
    return society, builds, alias


def test_build_steps_replay_in_a_copy_and_leave_the_build_dir_as_it_was(
    build_home: tuple[Society, Path, Path], tmp_path: Path
) -> None:
    """A build to green through a fake code seat; its sandbox, spec and grind steps replayed.
    Each is done again in a copy of the build dir (the grinder clones and grinds there, its
    iteration notes kept, not posted): the home, the build root and the alias are
    byte-identical after, and the replayed grind is green like the recorded one."""
    society, builds, alias = build_home
    folder = builds / "pycalc"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_calc.py").write_text(PY_SPEC)
    up = start_up(society, nicks=BUILD_NICKS)
    try:
        text = ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="pyfix")
        (tmp_path / "ticket.md").write_text(text)
        done = run_cli(society.root, "build", str(tmp_path / "ticket.md"), timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        up.stop()
    thread = done.stderr.split("build ", 1)[1].split()[0]
    root = society.root
    steps = keys(root, thread)
    before = tree(root, builds) | {str(alias): str(alias.readlink())}
    room = society.room.read_bytes()
    results = {key: replay(root, thread, key) for key in steps}
    grind = next(r for r in results.values() if r["replayed"]["data"].get("kind") == "grind-result")
    assert grind["recorded"]["data"]["green"] is True
    assert grind["replayed"]["data"]["green"] is True, grind["replayed"]
    clone = grind["replayed"]["data"]["clone"]
    assert clone.startswith(str(builds.resolve())) and clone != grind["recorded"]["data"]["clone"]
    assert str(Path(clone) / "calc.py") in grind["copy"]["written"]["created"]
    notes = grind["copy"]["would_post"]
    assert notes and all(n["data"]["kind"] == "grind-iteration" for n in notes)
    sandbox = next(r for r in results.values() if r["nick"] == "sandbox")
    assert sandbox["replayed"]["data"]["build_dir"] == str(folder.resolve())
    assert sandbox["gates"]["replayed"]["pass"] is True
    assert tree(root, builds) | {str(alias): str(alias.readlink())} == before
    assert society.room.read_bytes() == room
    refused = run_cli(root, "replay", thread, "--step", grind["step"], "--fork")
    assert refused.returncode == 2 and "writes files" in refused.stderr

"""A memory repository whose own config names a command: the backpass refuses it by name.

A filter driver (with the attributes naming it), `gpg.program` with signing on,
or an fsmonitor program in a memory repository's `.git/config` would each run a
program during the backpass's `git add`/`git commit`/`git status`. The run fails
loud naming the key, no branch or state is written, and the planted program,
which would append the home's secret to a marker, never runs: through the real
pipeline in-process, and through `bullpen backpass` on a real hub and lurkers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.backpass.helpers import BackpassHome, FakeJudge, drive, git
from tests.backpass.test_run import ALPHA, GOOD_AND_FABRICATED, scripted
from tests.support import Society, run_cli, wait_for

SECRET = "memory-plant-secret-value"


def _program(tmp_path: Path) -> tuple[Path, Path]:
    """A planted program that copies a secret to a marker outside the repositories."""
    secret, marker = tmp_path / "secret", tmp_path / "outside" / "marker"
    secret.write_text(SECRET)
    marker.parent.mkdir()
    program = tmp_path / "planted.sh"
    program.write_text(f"#!/bin/sh\ncat {secret} >> {marker}\ncat\n")
    program.chmod(0o755)
    return program, marker


def plant_filter(repo: Path, program: Path) -> None:
    git(repo, "config", "filter.x.clean", str(program))
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* filter=x\n")


def plant_gpg(repo: Path, program: Path) -> None:
    git(repo, "config", "gpg.program", str(program))
    git(repo, "config", "commit.gpgsign", "true")


def plant_fsmonitor(repo: Path, program: Path) -> None:
    git(repo, "config", "core.fsmonitor", str(program))


PLANTS: dict[str, tuple[str, str, Callable[[Path, Path], None]]] = {
    "filter": ("public", "filter.x.clean", plant_filter),
    "gpg": ("private", "gpg.program", plant_gpg),
    "fsmonitor": ("public", "core.fsmonitor", plant_fsmonitor),
}


@pytest.mark.parametrize("case", sorted(PLANTS))
def test_a_planted_memory_repo_fails_the_run_by_name(
    bp_home: BackpassHome, tmp_path: Path, case: str
) -> None:
    """The run fails naming the key and the repository; nothing ran, nothing was written."""
    which, key, plant = PLANTS[case]
    program, marker = _program(tmp_path)
    repo = bp_home.public if which == "public" else bp_home.private
    plant(repo, program)
    bp_home.trace("alpha.md", ALPHA)
    outcome = drive(bp_home.home, bp_home.params(), FakeJudge(scripted(GOOD_AND_FABRICATED)))
    body = outcome.final.body
    assert outcome.data["ok"] is False
    assert f"git config sets {key}" in body and str(repo) in body, body
    assert not marker.exists(), "the planted program ran"
    for each in (bp_home.public, bp_home.private):
        assert git(each, "branch", "--list", "memory-backpass/*") == ""
    assert not bp_home.state.exists()


NICKS = ("foreman", "tracelister", "analyst", "quotechecker", "ledgerkeeper", "synthesizer")


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Society]:
    society = Society(tmp_path / "home", demo=True)
    society.start_hub()
    try:
        lurkers = [society.spawn(f"lurk-{nick}", "lurk", nick) for nick in NICKS]
        wait_for(
            lambda: all("lurking" in p.output() or not p.alive() for p in lurkers),
            90,
            "the backpass lurkers to start",
        )
        assert all(p.alive() for p in lurkers), [p.output() for p in lurkers]
        yield society
    finally:
        society.stop_all()


@pytest.mark.timeout(400)
def test_bullpen_backpass_refuses_planted_memory_repos(running: Society, tmp_path: Path) -> None:
    """`bullpen backpass` on a real hub: a filter in the public repository, then gpg.program
    in the private one, each fails the run loud by name; the programs never run."""
    root = running.root
    program, marker = _program(tmp_path)
    public, private = root / "memory" / "public", root / "memory" / "private"
    plant_filter(public, program)
    plant_gpg(private, program)
    heads = {repo: git(repo, "rev-parse", "HEAD") for repo in (public, private)}
    refused = run_cli(root, "backpass", timeout=300)
    assert refused.returncode != 0, refused.stdout + refused.stderr
    said = refused.stdout + refused.stderr
    assert "git config sets filter.x.clean" in said or "git config sets gpg.program" in said, said
    assert "nothing was run" in said
    assert not marker.exists(), "a planted program ran during bullpen backpass"
    first = "filter.x.clean" if "filter.x.clean" in said else "gpg.program"
    # The key named is removed as the message says; the other one is named next.
    if first == "filter.x.clean":
        git(public, "config", "--unset", "filter.x.clean")
        (public / ".git" / "info" / "attributes").write_text("")
        second = "gpg.program"
    else:
        git(private, "config", "--unset", "gpg.program")
        git(private, "config", "--unset", "commit.gpgsign")
        second = "filter.x.clean"
    again = run_cli(root, "backpass", timeout=300)
    said = again.stdout + again.stderr
    assert again.returncode != 0 and f"git config sets {second}" in said, said
    assert not marker.exists(), "a planted program ran during bullpen backpass"
    for repo, head in heads.items():
        assert git(repo, "rev-parse", "HEAD") == head
        assert git(repo, "branch", "--list", "memory-backpass/*") == ""

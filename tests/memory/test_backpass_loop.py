"""The backpass feeds memory: a trace -> a backpass run -> the operator merges its branch ->
`bullpen memory sync` -> the bound nick's next wake carries the lesson, and
`bullpen memory show` leads back to the trace's sha256. A bullet removed is retracted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agents.backpass.config import BackpassConfig
from agents.backpass.traces import read_state
from tests.backpass.helpers import DAY, drive, git
from tests.memory.helpers import add_member, post, start_lurkers, wait_reply
from tests.support import Society, run_cli

LESSON = "Running the tests before pushing worked."


@pytest.fixture(autouse=True)
def _hermetic_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def _bind_private_to(root: Path, nick: str) -> None:
    path = root / "society.toml"
    text = path.read_text()
    path.write_text(text.replace("[backpass]\n", f'[backpass]\nprivate_nick = "{nick}"\n', 1))


def _told(society: Society, nick: str) -> list[dict]:
    reply = wait_reply(society, post(society, f"@{nick}", "about to push the branch")["id"])
    return list(reply["data"]["got"])


def test_a_merged_backpass_bullet_reaches_the_nicks_next_wake(tmp_path: Path) -> None:
    """The whole loop, then the bullet's removal retracts the lesson."""
    society = Society(tmp_path / "home", demo=True)
    try:
        root = society.root
        add_member(root, "stepper", handler="tests.memory.steps:told", timeout_s=20)
        _bind_private_to(root, "stepper")
        home = society.home
        outcome = drive(home, BackpassConfig.from_home(home).run_params(home))
        assert outcome.data["ok"], outcome.final.body
        private = root / "memory" / "private"
        assert LESSON not in (private / "memory.md").read_text()  # not merged: not memory yet
        git(private, "merge", "--quiet", "--ff-only", f"memory-backpass/{DAY}")

        society.start_hub()
        start_lurkers(society, "librarian", "stepper")
        synced = run_cli(root, "memory", "sync")
        assert synced.returncode == 0, synced.stderr
        assert "-> /bullpen/lessons-learned/stepper" in synced.stdout

        lesson = next(g for g in _told(society, "stepper") if g["text"] == f"{LESSON}")
        assert lesson["ns"] == "/bullpen/lessons-learned/stepper"
        shown = run_cli(root, "memory", "show", lesson["id"])
        assert shown.returncode == 0, shown.stderr
        assert re.search(r"source +backpass private@[0-9a-f]{12} PRV-\d{3}", shown.stdout)
        traced = re.search(r"^traces +(.+)$", shown.stdout, re.M)
        assert traced, shown.stdout
        analysed = set(read_state(root / "state" / "backpass.sha256").values())
        cited = {sha.strip() for sha in traced.group(1).split(",")}
        assert cited and cited <= analysed

        again = run_cli(root, "memory", "sync")  # nothing changed: nothing saved
        assert again.returncode == 0 and "0 saved, 0 retracted" in again.stdout

        memory = private / "memory.md"
        memory.write_text(
            "".join(x for x in memory.read_text().splitlines(True) if LESSON not in x)
        )
        git(private, "commit", "--quiet", "-am", "drop a lesson")
        removed = run_cli(root, "memory", "sync")
        assert removed.returncode == 0 and "1 retracted" in removed.stdout, removed.stdout
        assert LESSON not in [g["text"] for g in _told(society, "stepper")]
    finally:
        society.stop_all()

"""The demo `bullpen init --demo` lays down, and a backpass over it with the local seat."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agents.backpass.demo import lay_down_demo
from room.errors import ConfigError
from tests.backpass.helpers import DAY, PROMPTS, BackpassHome, drive, git


@pytest.fixture
def demo_home(tmp_path: Path) -> BackpassHome:
    root = tmp_path / "home"
    root.mkdir()
    lay_down_demo(root)
    (root / "state").mkdir()  # `bullpen init --demo` makes it, with the lurkers' cursors
    shutil.copytree(PROMPTS, root / "prompts")
    return BackpassHome(root)


class TestDemo:
    def test_lays_down_committed_repositories_and_traces(self, demo_home: BackpassHome) -> None:
        """Both memories are git repositories with one commit on main; at least 6 traces exist."""
        for repo in (demo_home.public, demo_home.private):
            assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
            assert git(repo, "rev-list", "--count", "main") == "1"
            assert git(repo, "status", "--porcelain") == ""
        assert (demo_home.private / "ledger.md").exists()
        traces = [p for p in demo_home.traces.rglob("*") if p.is_file()]
        assert len(traces) >= 6
        assert {p.suffix for p in traces} == {".md", ".jsonl"}
        text = "".join(p.read_text() for p in traces)
        for special in ("&", "$1", "\\1", "{}", "{{trace}}", "{{session}}", "{{date}}"):
            assert special in text

    def test_never_overwrites(self, demo_home: BackpassHome) -> None:
        """Laying the demo down twice fails and says so."""
        with pytest.raises(ConfigError, match="already exists"):
            lay_down_demo(demo_home.root)

    def test_a_local_backpass_over_the_demo(self, demo_home: BackpassHome) -> None:
        """With the local seat: no drops, corroborations, prunes by age and coverage, one private edit."""
        outcome = drive(demo_home.home, demo_home.params())
        funnel = outcome.funnel
        assert outcome.data["ok"], outcome.final.body
        assert (funnel["traces_found"], funnel["traces_analyzed"], funnel["items_dropped"]) == (
            6,
            6,
            0,
        )
        assert funnel["corroborations"] == 2  # the ledger's client line, and tests-before-pushing
        assert (funnel["covered"], funnel["prunes_age"], funnel["prunes_covered"]) == (1, 1, 1)
        assert funnel["edits_private"] == 2 and funnel["edits_public"] == 0
        memory = git(demo_home.private, "show", f"memory-backpass/{DAY}:memory.md")
        assert "- Running the tests before pushing worked." in memory
        assert drive(demo_home.home, demo_home.params()).data["nothing_pending"] is True

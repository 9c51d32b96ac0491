"""The private copy a file-writing step is replayed in: what it copies, and what it refuses.

Real folders, links and git worktrees; each refusal leaves the original untouched and says
why, and nothing under the copy shares an inode with the original.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agents.replay.copy import changes, private_copy
from room.errors import UsageError


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    (root / "runs" / "run-a").mkdir(parents=True)
    (root / "runs" / "run-b").mkdir(parents=True)
    (root / "runs" / "run-a" / "items.json").write_text("[1]")
    (root / "runs" / "run-b" / "items.json").write_text("[2]")
    (root / "briefs").mkdir()
    (root / "briefs" / "old.md").write_text("old brief")
    return root


def test_named_paths_are_copied_not_linked_and_a_runs_root_narrowed(home: Path) -> None:
    """The runs root is copied with only this run's folder; files are new inodes; the ask's
    paths point into the copy and back; a write there is reported and leaves the original."""
    with private_copy([home], "run-a") as copy:
        copy.copy(home / "runs")
        copy.copy(home / "briefs")
        assert [c.to_dict().get("only") for c in copy.copied] == ["run-a", None]
        inside = copy.into(home / "runs" / "run-a" / "items.json")
        assert inside.read_text() == "[1]"
        assert inside.stat().st_ino != (home / "runs" / "run-a" / "items.json").stat().st_ino
        assert not copy.into(home / "runs" / "run-b").exists()
        asked = copy.map_in({"run": {"runs": str(home / "runs")}, "terms": ["/not/mine"]})
        assert asked["run"]["runs"] == str(copy.into(home / "runs"))
        assert asked["terms"] == ["/not/mine"]  # outside the home: left as it was
        assert copy.map_out(asked)["run"]["runs"] == str(home / "runs")
        before = copy.snapshot()
        inside.write_text("[1, 1]")
        copy.into(home / "briefs" / "new.md").write_text("new")
        written = changes(before, copy.snapshot())
        assert written["changed"] == [str(home / "runs" / "run-a" / "items.json")]
        assert written["created"] == [str(home / "briefs" / "new.md")]
        folder = copy.folder
    assert not folder.exists()  # removed, with what the step wrote there
    assert (home / "runs" / "run-a" / "items.json").read_text() == "[1]"
    assert not (home / "briefs" / "new.md").exists()


def test_a_link_out_of_the_copied_folder_is_refused(home: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere.txt").write_text("not the home's")
    os.symlink(tmp_path / "elsewhere.txt", home / "briefs" / "link.md")
    with private_copy([home], "run-a") as copy, pytest.raises(UsageError) as refused:
        copy.copy(home / "briefs")
    assert "does not follow links out" in refused.value.message
    assert str(tmp_path / "elsewhere.txt") in refused.value.message


def test_a_link_inside_is_kept_pointing_into_the_copy(home: Path) -> None:
    os.symlink(home / "briefs" / "old.md", home / "briefs" / "same.md")
    with private_copy([home], "run-a") as copy:
        copy.copy(home / "briefs")
        link = copy.into(home / "briefs" / "same.md")
        assert link.is_symlink() and Path(os.readlink(link)) == copy.into(home / "briefs/old.md")


def test_a_path_outside_the_home_is_read_where_it_is_never_copied(
    home: Path, tmp_path: Path
) -> None:
    ticket = tmp_path / "ticket.md"
    ticket.write_text("a ticket")
    with private_copy([home], "run-a") as copy:
        copy.copy(ticket)
        assert copy.copied == [] and copy.summary()["not_copied"] == [str(ticket)]
        assert copy.map_in(str(ticket)) == str(ticket)


def test_a_worktree_is_repointed_at_the_copied_repository(home: Path) -> None:
    """A git worktree in the run folder whose repository is copied too: its pointers lead
    into the copy, so a commit there never reaches the original repository."""
    repo = home / "memory" / "private"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "memory.md").write_text("- a lesson\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    git(repo, "worktree", "add", "-q", "-b", "side", str(home / "runs" / "run-a" / "wt"))
    original_head = git(repo, "rev-parse", "side")
    with private_copy([home], "run-a") as copy:
        copy.copy(repo)
        copy.copy(home / "runs")
        copy.repoint_git()
        worktree = copy.into(home / "runs" / "run-a" / "wt")
        (worktree / "memory.md").write_text("- changed in the copy\n")
        git(worktree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")
        assert git(copy.into(repo), "rev-parse", "side") != original_head
    assert git(repo, "rev-parse", "side") == original_head
    assert git(home / "runs" / "run-a" / "wt", "status", "--porcelain") == ""


def test_a_worktree_of_a_repository_not_copied_is_refused(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "home" / "memory" / "public"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(
        repo,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
    )
    git(repo, "worktree", "add", "-q", "-b", "side", str(home / "runs" / "run-a" / "wt"))
    with private_copy([home], "run-a") as copy:
        copy.copy(home / "runs")
        with pytest.raises(UsageError) as refused:
            copy.repoint_git()
    assert "would write the original repository" in refused.value.message

"""Plain git for the backpass, against real repositories in tmp dirs."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest

from agents.backpass.gitwork import (
    GitError,
    PlantedConfig,
    Worktree,
    add_worktree,
    commit,
    discard,
    free_branch,
    git,
    inspect_repo,
    release,
    show_file,
)
from tests.backpass.helpers import git as tgit
from tests.backpass.helpers import make_repo
from tests.support import pid_alive, wait_for

PREFIX = "memory-backpass"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"memory.md": "- one\n", "sub/x.md": "x"})


class TestInspect:
    def test_default_branch_and_base(self, repo: Path) -> None:
        """A fresh repository builds on its checked-out default branch."""
        info = inspect_repo(repo, PREFIX)
        assert (info.default, info.base, info.unmerged) == ("main", "main", ())
        assert info.commit == tgit(repo, "rev-parse", "main")
        assert Path(info.main_worktree) == repo.resolve()

    def test_remote_head_wins_over_a_checked_out_feature_branch(
        self, tmp_path: Path, repo: Path
    ) -> None:
        """With origin/HEAD set, the default is the remote's, and the checked-out branch is protected too."""
        clone = tmp_path / "clone"
        subprocess.run(["git", "clone", "--quiet", str(repo), str(clone)], check=True)
        tgit(clone, "checkout", "--quiet", "-b", "feature")
        info = inspect_repo(clone, PREFIX)
        assert info.default == "main"
        assert {"main", "feature"} <= set(info.protected)

    def test_unmerged_backpass_branch_becomes_the_base(self, repo: Path) -> None:
        """Tonight's branch stacks on last night's branch while it is not merged."""
        tgit(repo, "branch", f"{PREFIX}/2026-10-19")
        assert inspect_repo(repo, PREFIX).base == "main"  # merged: nothing new on it
        tgit(repo, "worktree", "add", "--quiet", str(repo.parent / "wt"), f"{PREFIX}/2026-10-19")
        (repo.parent / "wt" / "memory.md").write_text("- one\n- two\n")
        tgit(repo.parent / "wt", "commit", "--quiet", "-am", "two")
        info = inspect_repo(repo, PREFIX)
        assert (info.base, info.unmerged) == (f"{PREFIX}/2026-10-19", (f"{PREFIX}/2026-10-19",))
        assert show_file(repo, info.commit, "memory.md") == "- one\n- two\n"

    def test_errors_say_what_to_do(self, tmp_path: Path, repo: Path) -> None:
        """Missing, non-repository, subfolder and empty repositories are refused with a fix."""
        with pytest.raises(GitError, match="does not exist"):
            inspect_repo(tmp_path / "none", PREFIX)
        (tmp_path / "plain").mkdir()
        with pytest.raises(GitError, match="not a git work tree"):
            inspect_repo(tmp_path / "plain", PREFIX)
        with pytest.raises(GitError, match="top folder"):
            inspect_repo(repo / "sub", PREFIX)
        tgit(tmp_path / "plain", "init", "--quiet")
        with pytest.raises(GitError, match="cannot tell the default branch"):
            inspect_repo(tmp_path / "plain", PREFIX)


class TestShowFile:
    def test_exact_bytes_and_missing_files(self, repo: Path) -> None:
        """A file is read at a commit with its CRLF intact; a missing one is None."""
        (repo / "crlf.md").write_bytes(b"- a\r\n- b")
        tgit(repo, "add", "crlf.md")
        tgit(repo, "commit", "--quiet", "-m", "crlf")
        head = tgit(repo, "rev-parse", "HEAD")
        assert show_file(repo, head, "crlf.md") == "- a\r\n- b"
        assert show_file(repo, head, "nope.md") is None


class TestBranches:
    def test_free_branch_adds_a_suffix(self, repo: Path) -> None:
        """A taken branch name gets -2, -3 …"""
        assert free_branch(repo, f"{PREFIX}/2026-10-20") == f"{PREFIX}/2026-10-20"
        tgit(repo, "branch", f"{PREFIX}/2026-10-20")
        tgit(repo, "branch", f"{PREFIX}/2026-10-20-2")
        assert free_branch(repo, f"{PREFIX}/2026-10-20") == f"{PREFIX}/2026-10-20-3"

    def test_commit_in_a_worktree_leaves_main_alone(self, tmp_path: Path, repo: Path) -> None:
        """A commit lands on the new branch; main and the main worktree's files do not move."""
        head = tgit(repo, "rev-parse", "main")
        info = inspect_repo(repo, PREFIX)
        worktree = add_worktree(info, f"{PREFIX}/x", tmp_path / "runs" / "wt")
        (worktree.path / "memory.md").write_text("- one\n- two & $1\n")
        sha = commit(worktree, "add two", ["memory.md"], prefix=PREFIX)
        assert sha == tgit(repo, "rev-parse", f"{PREFIX}/x")
        assert (
            tgit(repo, "log", "-1", "--format=%an <%ae>", f"{PREFIX}/x")
            == "bullpen <bullpen@localhost>"
        )
        assert tgit(repo, "rev-parse", "main") == head
        assert (repo / "memory.md").read_text() == "- one\n"
        assert tgit(repo, "symbolic-ref", "--short", "HEAD") == "main"
        assert commit(worktree, "nothing", ["memory.md"], prefix=PREFIX) is None

    def test_refuses_to_commit_on_a_protected_branch(self, repo: Path) -> None:
        """Even handed the main worktree on main, commit() refuses."""
        info = inspect_repo(repo, PREFIX)
        (repo / "memory.md").write_text("changed\n")
        with pytest.raises(GitError, match="refusing to commit"):
            commit(Worktree(repo, repo, "main", info), "x", ["memory.md"], prefix=PREFIX)
        with pytest.raises(GitError, match="protected branch"):
            add_worktree(info, "main", repo.parent / "elsewhere")
        assert tgit(repo, "rev-list", "--count", "main") == "1"

    def test_discard_removes_worktree_and_branch(self, tmp_path: Path, repo: Path) -> None:
        """A failed step leaves no worktree and no branch behind."""
        worktree = add_worktree(inspect_repo(repo, PREFIX), f"{PREFIX}/y", tmp_path / "wt")
        discard(worktree)
        assert not worktree.path.exists()
        assert tgit(repo, "branch", "--list", f"{PREFIX}/*") == ""
        assert str(worktree.path) not in tgit(repo, "worktree", "list")


class TestTimeout:
    def test_overrun_kills_only_the_process_group_it_started(
        self, tmp_path: Path, repo: Path
    ) -> None:
        """A git that hangs is killed with its process group; a look-alike elsewhere survives.

        A repository's own filter may not run at all (TestIsolation), so the hang is a
        named pipe no one writes: git blocks reading it."""
        fifo = tmp_path / f"never-written-{os.getpid()}"
        os.mkfifo(fifo)
        bystander = subprocess.Popen(["sleep", "300"])
        try:
            with pytest.raises(GitError, match="ran over 2 s and was stopped"):
                git(repo, "hash-object", str(fifo), timeout=2)

            def hanging() -> list[str]:
                found = []
                for entry in Path("/proc").iterdir():
                    with contextlib.suppress(OSError):
                        if str(fifo).encode() in (entry / "cmdline").read_bytes():
                            found.append(entry.name)
                return [pid for pid in found if pid_alive(int(pid))]

            wait_for(lambda: not hanging(), timeout=10, what="the hanging git to be killed")
            assert bystander.poll() is None
        finally:
            bystander.kill()  # by the exact child we started, never by a pattern
            bystander.wait()


class TestIsolation:
    def test_hooks_fsmonitor_and_outside_config_are_off(
        self, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A pre-commit hook and system/global/env config do nothing; an fsmonitor program the
        repository's own config names is refused by name before git runs."""
        marker = tmp_path / "ran"
        script = f'#!/bin/sh\necho "$0" >> {marker}\n'
        hook = repo / ".git" / "hooks" / "pre-commit"
        hook.write_text(script)
        hook.chmod(0o755)
        monitor = tmp_path / "fsmonitor"
        monitor.write_text(script)
        monitor.chmod(0o755)
        signer = tmp_path / "gpg"
        signer.write_text(script + "exit 1\n")
        signer.chmod(0o755)
        global_config = tmp_path / "gitconfig"
        global_config.write_text(f"[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = {signer}\n")
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(global_config))
        monkeypatch.setenv("GIT_CONFIG_COUNT", "2")
        monkeypatch.setenv("GIT_CONFIG_KEY_0", "commit.gpgsign")
        monkeypatch.setenv("GIT_CONFIG_VALUE_0", "true")
        monkeypatch.setenv("GIT_CONFIG_KEY_1", "gpg.program")
        monkeypatch.setenv("GIT_CONFIG_VALUE_1", str(signer))
        info = inspect_repo(repo, PREFIX)
        worktree = add_worktree(info, f"{PREFIX}/quiet", tmp_path / "wt")
        (worktree.path / "memory.md").write_text("- changed\n")
        assert commit(worktree, "x", ["memory.md"], prefix=PREFIX)
        git(repo, "status")
        assert not marker.exists(), marker.read_text()
        release(worktree)
        tgit(repo, "config", "core.fsmonitor", str(monitor))
        (repo / "memory.md").write_text("- changed again\n")
        with pytest.raises(
            PlantedConfig, match=r"git config sets core\.fsmonitor \(in \.git/config\)"
        ):
            git(repo, "status")
        assert not marker.exists(), marker.read_text()

"""What the synthesizer writes for people: commit messages and the funnel's notes."""

from __future__ import annotations

from agents.backpass.publish import commit_message
from agents.backpass.schemas import Edit

DAY = "2026-10-20"


class TestCommitMessage:
    def test_add_after_a_bullet_says_after(self) -> None:
        """An add after PUB-001 adds a new bullet; the subject must not read 'add PUB-001'."""
        edit = Edit(repo="public", op="add", bullet="PUB-001", text="Pin the version.")
        subject = commit_message(DAY, edit).splitlines()[0]
        assert subject == f"memory-backpass {DAY}: add a bullet after PUB-001"

    def test_add_at_the_end_and_the_other_ops(self) -> None:
        """An add with no anchor, a replace and a remove each say what happened to which bullet."""
        add = Edit(repo="private", op="add", text="Pin the version.")
        replace = Edit(repo="public", op="replace", bullet="PUB-002", text="Keep it small.")
        remove = Edit(repo="private", op="remove", bullet="PRV-001", reason="stale")
        assert [commit_message(DAY, e).splitlines()[0] for e in (add, replace, remove)] == [
            f"memory-backpass {DAY}: add a bullet at the end",
            f"memory-backpass {DAY}: replace PUB-002",
            f"memory-backpass {DAY}: remove PRV-001",
        ]
        assert commit_message(DAY, add).endswith("\n\nPin the version.")

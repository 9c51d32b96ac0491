from __future__ import annotations

from pathlib import Path

import pytest

from tests.backpass.helpers import BackpassHome, new_home


@pytest.fixture(autouse=True)
def _hermetic_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No global or system git configuration: no identity, no hooks, no surprises."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)


@pytest.fixture
def bp_home(tmp_path: Path) -> BackpassHome:
    """A home with two committed memory repositories, an empty traces folder and the prompts."""
    return new_home(tmp_path)

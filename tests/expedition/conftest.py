from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agents.home import Home
from tests.expedition.sim import write_home

DEMO_KB = Path(__file__).resolve().parents[2] / "config" / "demo" / "kb"

MakeKb = Callable[[dict[str, str], str], Path]


@pytest.fixture
def demo_kb() -> Path:
    return DEMO_KB


@pytest.fixture
def demo_home(tmp_path: Path) -> Home:
    """A home whose [expedition] kb is the shipped sample knowledge base."""
    return write_home(tmp_path / "home", DEMO_KB)


@pytest.fixture
def make_kb(tmp_path: Path) -> MakeKb:
    """Write a knowledge base: {relative path: text} plus the index text."""

    def make(files: dict[str, str], index: str) -> Path:
        kb = tmp_path / "kb"
        kb.mkdir(exist_ok=True)
        (kb / "corpus_index.md").write_text(index, encoding="utf-8")
        for name, text in files.items():
            path = kb / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return kb

    return make

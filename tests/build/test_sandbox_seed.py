"""`bullpen init` seeds /bullpen/sandbox with the campaign-sandbox rules, through the room."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from agents.librarian.seed import SEED_FOLDER, Seeder
from agents.memory.index import Index
from agents.memory.namespaces import SEED_NAMESPACES, index_path
from tests.support import Society, run_cli, wait_for

MANUAL = ("/bullpen/sandbox", "/bullpen/ops", "/bullpen/research", "/bullpen/artifacts")


def _recall(root: Path, *words: str) -> list[dict]:
    done = run_cli(root, "memory", "recall", *words, "--ns", "/bullpen/sandbox", "-k", "20",
                   "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def test_bullpen_init_lays_down_the_seed_and_declares_the_namespaces(tmp_path: Path) -> None:
    """The CLI's home: the four manual-lookup namespaces declared, the rules pending with the
    build root and alias filled in, and no room yet (the hub has never run)."""
    root = tmp_path / "home"
    made = run_cli(root, "init", str(root))
    assert made.returncode == 0, made.stderr
    declared = tomllib.loads((root / "society.toml").read_text())["memory"]["namespaces"]
    assert set(MANUAL) <= set(declared) and set(SEED_NAMESPACES) <= set(declared)
    pending = root / SEED_FOLDER / "sandbox-rules.toml"
    text = pending.read_text()
    assert "/tmp/sandbox" in text and "/tmp/bullpen-build" in text and "@ROOT@" not in text
    assert len(tomllib.loads(text)["entry"]) == 7
    assert not (root / "room" / "room.jsonl").exists()


def test_the_librarian_saves_the_seed_through_the_room_once(tmp_path: Path) -> None:
    """The librarian's first start saves each rule as a room line from a trusted, verified
    poster; recall finds all seven under /bullpen/sandbox; the seed is then marked saved, so
    nothing is posted again."""
    society = Society(tmp_path / "home", seed_memory=True)
    root = society.root
    pending = root / SEED_FOLDER / "sandbox-rules.toml"
    try:
        society.start_hub()
        society.start_lurker("librarian")
        words = "sandbox OR tmp OR build OR ticket OR grinder OR clone"
        wait_for(lambda: len(_recall(root, words)) == 7 or None, 60, "the seeded rules")
        everything = _recall(root, words)
        assert {e["ns"] for e in everything} == {"/bullpen/sandbox"}
        ticket = next(e for e in everything if "no-regression clause" in e["text"])
        assert "REPO (/tmp/sandbox" in ticket["text"] and "@ALIAS@" not in ticket["text"]
        lines = [m for m in society.lines() if m.get("thread") == "memory-seed"]
        assert len(lines) == 7 and all(m["verified"] and m["to"] == "@librarian" for m in lines)
        wait_for(lambda: not pending.exists(), 30, "the seed marked saved")
        assert pending.with_name("sandbox-rules.toml.saved").is_file()
        index = Index.open(index_path(society.home), create=False)
        try:
            assert Seeder(root, "librarian").posts(index) == []  # a restart posts nothing
        finally:
            index.close()
    finally:
        society.stop_all()

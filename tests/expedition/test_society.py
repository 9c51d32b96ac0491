"""A natural-phrase model finds the deep cut in a society run: a real hub and lurkers under
`bullpen up`, the real CLI, and the model a real program the `cmd` seat runs
(tests/fakes/phrase_model.py) answering the way a model talks."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.expedition.campaign import FAKE, THEMES, write_kb, write_phrases
from tests.support import EXPEDITION_LURKERS, Society, run_cli, set_seat, start_up

pytestmark = pytest.mark.timeout(300)


def test_natural_phrases_find_the_deep_cut(tmp_path: Path) -> None:
    """The Dig Report lists cold-water.md as a deep cut for 'endurance', from phrases such as
    'swimming in cold water' that its summary never spells character for character."""
    society = Society(tmp_path / "home", demo=True)
    shutil.rmtree(society.root / "kb")
    write_kb(society.root / "kb")
    log = tmp_path / "calls.jsonl"
    env = {
        "FAKE_PHRASES_FILE": str(write_phrases(tmp_path / "phrases.json")),
        "FAKE_MODEL_LOG": str(log),
    }
    seat = "\n".join(
        [
            'kind = "cmd"',
            f"command = {json.dumps([sys.executable, str(FAKE)])}",
            "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }",
            "timeout_s = 30",
        ]
    )
    for role in ("termgen", "score", "scotoma"):
        set_seat(society.root, role, seat)
    theme = THEMES[0]
    up = start_up(society, nicks=EXPEDITION_LURKERS)
    try:
        done = run_cli(
            society.root,
            "expedition",
            "--title",
            theme.title,
            "--keyword",
            theme.keyword,
            timeout=240,
        )
    finally:
        up.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    deep = done.stdout.split("Deep cuts:")[1].split("Voice anchors:")[0]
    assert re.search(r"^- cold-water\.md \(row_\d+\) — ", deep, re.M), done.stdout
    assert "swimming in cold water" in done.stdout  # the phrases were what it searched
    steps = {json.loads(line)["step"] for line in log.read_text().splitlines()}
    assert steps == {"termgen", "score", "scotoma"}

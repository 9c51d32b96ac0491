from __future__ import annotations

import asyncio
from pathlib import Path

from agents.expedition.late_steps import extract_excerpts
from tests.expedition.conftest import MakeKb
from tests.expedition.sim import ask, step_context, write_home
from tests.expedition.texts import document, paragraph

VOICE = "\n\n".join([paragraph(90), paragraph(90)])
NARRATION = "\n\n".join(
    ["Avery describes it. " + paragraph(90, first_person=False), paragraph(90, first_person=False)]
)
RULES = "\n\n".join([paragraph(90, first_person=False), paragraph(90, first_person=False)])


def test_voice_anchors_are_sought_beyond_the_chosen_files(tmp_path: Path, make_kb: MakeKb) -> None:
    """With no voice among the chosen files, relevant lived files are read for one, narration is not."""
    kb = make_kb(
        {
            "rules.md": document(RULES, role="guidance"),
            "told.md": document(NARRATION),
            "mine.md": document(VOICE),
        },
        "",
    )
    home = write_home(tmp_path / "home", kb)
    item = {"summary": "s", "embodies": 1, "why": "w"}
    data = {
        "context": {"kb": str(kb)},
        "chosen": [{"id": "row_1", "file": "rules.md", "kind": "direct", **item}],
        "others": [
            {"id": "row_2", "file": "told.md", **item},
            {"id": "row_3", "file": "mine.md", **item},
        ],
    }
    reply = asyncio.run(extract_excerpts(ask(data, to="excerpter"), step_context(home)))
    excerpts = reply.data["excerpts"]
    assert [(e["file"], e["kind"], e["voice_anchor"]) for e in excerpts] == [
        ("rules.md", "direct", False),
        ("mine.md", "voice", True),
    ]
    assert reply.data["flags"] == []  # a non-chosen file's rejection is not the operator's concern

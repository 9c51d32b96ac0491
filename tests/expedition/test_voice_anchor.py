"""Voice anchors: sought among every retrieved lived file, short voice logs kept whole,
a file the operator points to checked with the same gates, paths shown as on disk."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agents.expedition.anchor import AnchorRefused, check_anchor
from agents.expedition.config import ExpeditionConfig
from agents.expedition.late_steps import extract_excerpts
from agents.expedition.scotoma import chosen
from agents.expedition.steps import retrieve_candidates
from tests.expedition.conftest import MakeKb
from tests.expedition.sim import ask, step_context, write_home
from tests.expedition.texts import document, index, paragraph

CONFIG = ExpeditionConfig(operator_names=["Avery"])
VOICE = "\n\n".join([paragraph(90), paragraph(90)])
SHORT_VOICE = "\n\n".join([paragraph(30), paragraph(30)])
SHORT_NARRATION = "Avery describes the morning. " + paragraph(30, first_person=False)
SHORT_RULES = paragraph(40, first_person=False)


def merged(*rows: tuple[str, str, int]) -> list[dict[str, object]]:
    return [
        {"id": i, "file": f, "summary": "s", "embodies": e, "why": "w", "prescore": 1}
        for i, f, e in rows
    ]


def test_a_voice_log_the_scorer_rated_0_still_anchors_the_voice(
    tmp_path: Path, make_kb: MakeKb
) -> None:
    """Every retrieved lived file is searched for a voice anchor, not only those scored >= 1."""
    kb = make_kb({"rules.md": document(VOICE, role="guidance"), "log.md": document(VOICE)}, "")
    home = write_home(tmp_path / "home", kb)
    rows = merged(("row_1", "rules.md", 3), ("row_2", "log.md", 0))
    direct, deep, others = chosen(rows, {"direct_hits": ["row_1"], "deep_cuts": []})
    assert [o["id"] for o in others] == ["row_2"]
    data = {"context": {"kb": str(kb)}, "chosen": direct + deep, "others": others}
    reply = asyncio.run(extract_excerpts(ask(data, to="excerpter"), step_context(home)))
    anchors = [(e["file"], e["kind"]) for e in reply.data["excerpts"] if e["voice_anchor"]]
    assert anchors == [("log.md", "voice")]


def test_a_short_lived_file_is_kept_whole_and_flagged(tmp_path: Path, make_kb: MakeKb) -> None:
    """Under the 150-word floor: a lived body is its own excerpt ([EXCERPT_SHORT]) and may anchor;
    short narration is still rejected as digest and short guidance is still too short."""
    kb = make_kb(
        {
            "short.md": document(SHORT_VOICE),
            "told.md": document(SHORT_NARRATION),
            "rules.md": document(SHORT_RULES, role="guidance"),
        },
        "",
    )
    home = write_home(tmp_path / "home", kb)
    item = {"summary": "s", "kind": "direct", "why": "w"}
    data = {
        "context": {"kb": str(kb)},
        "chosen": [
            {"id": "row_1", "file": "short.md", **item},
            {"id": "row_2", "file": "told.md", **item},
            {"id": "row_3", "file": "rules.md", **item},
        ],
        "others": [],
    }
    reply = asyncio.run(extract_excerpts(ask(data, to="excerpter"), step_context(home)))
    (entry,) = reply.data["excerpts"]
    assert entry["file"] == "short.md" and entry["short"] and entry["voice_anchor"]
    assert entry["text"] == SHORT_VOICE and entry["words"] < 150
    assert reply.data["flags"] == [
        "[EXCERPT_SHORT:short.md]",
        "[EXCERPT_DIGEST_REJECTED:told.md]",
        "[EXCERPT_TOO_SHORT:rules.md]",
    ]


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("rules.md", document(VOICE, role="guidance"), "is role: guidance, not role: lived"),
        ("told.md", document(SHORT_NARRATION), "digest layer or third-person narration"),
        ("flat.md", document("\n\n".join([paragraph(90, first_person=False)] * 2)), "0 paragraph"),
        ("absent.md", None, "is not a file in the run's knowledge base"),
    ],
    ids=["guidance", "narration", "no-first-person", "absent"],
)
def test_a_pointed_anchor_is_refused_with_the_reason(
    make_kb: MakeKb, name: str, text: str | None, reason: str
) -> None:
    kb = make_kb({name: text} if text else {}, "")
    with pytest.raises(AnchorRefused) as refused:
        check_anchor(kb, name, CONFIG)
    assert name in refused.value.message and reason in refused.value.message


def test_a_pointed_anchor_is_named_as_it_is_on_disk(make_kb: MakeKb) -> None:
    """`Corpus/x.md`, or the file's own path from the shell, both name `voice-logs/x.md`."""
    kb = make_kb({"voice-logs/x.md": document(VOICE)}, "")
    assert check_anchor(kb, "Corpus/voice-logs/x.md", CONFIG)["file"] == "voice-logs/x.md"
    assert check_anchor(kb, str(kb / "voice-logs/x.md"), CONFIG)["file"] == "voice-logs/x.md"


def test_retrieval_names_files_as_they_are_on_disk(tmp_path: Path, make_kb: MakeKb) -> None:
    """An index row `Corpus/voice-logs/x.md` is a candidate `voice-logs/x.md`: the path that exists."""
    rows = [("Corpus/voice-logs/x.md", "kiln patience", "k"), ("y.md", "kiln", "k")]
    kb = make_kb({"voice-logs/x.md": document(VOICE), "y.md": document(VOICE)}, index(rows))
    home = write_home(tmp_path / "home", kb)
    data = {"context": {"kb": str(kb)}, "terms": ["kiln"]}
    reply = asyncio.run(retrieve_candidates(ask(data, to="retriever"), step_context(home)))
    files = sorted(c["file"] for c in reply.data["candidates"])
    assert files == ["voice-logs/x.md", "y.md"]
    assert all((kb / f).is_file() for f in files)

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from agents.expedition.brief import BriefFront, find_voice_anchor, harvest_banned_phrases
from agents.expedition.excerpts import tell_pattern
from agents.expedition.late_steps import assemble_brief
from agents.home import Home
from room.errors import StepFailed
from tests.expedition.sim import ask, step_context, write_home
from tests.expedition.texts import paragraph

TELL = tell_pattern(["Avery"], ["recounts", "reflects", "records", "describes"])
LIVED = "\n\n".join([paragraph(80), paragraph(80)])
NARRATED = "\n\n".join([paragraph(80, first_person=False), paragraph(80, first_person=False)])
GUIDANCE = (
    'Never write "patience is a virtue" or **the slow craft movement**, nor "a labour of love,".'
)


def excerpt(file: str, text: str, role: str = "lived", kind: str = "direct") -> dict[str, Any]:
    return {
        "id": "row_1",
        "file": file,
        "text": text,
        "role": role,
        "kind": kind,
        "words": len(text.split()),
    }


def context(tmp_path: Path, voice: str = "Carbon", blaze: str | None = None) -> dict[str, Any]:
    return {
        "title": "Waiting Is Part of the Work",
        "keyword_primary": "patience",
        "slug": "waiting-is-part-of-the-work",
        "voice": voice,
        "pattern": "Files that embody patience.",
        "briefs": str(tmp_path / "home" / "briefs"),
        "blaze_path": blaze,
    }


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return write_home(tmp_path / "home", tmp_path / "kb")


def brief(home: Home, data: dict[str, Any]) -> Any:
    return asyncio.run(
        assemble_brief(ask(data, to="briefer", thread="exp-abc"), step_context(home))
    )


class TestBannedPhrases:
    def test_quoted_and_bold_spans_are_harvested_verbatim(self) -> None:
        """Quoted and bold phrases are copied as written, less trailing punctuation inside quotes."""
        assert harvest_banned_phrases([GUIDANCE]) == [
            "patience is a virtue",
            "the slow craft movement",
            "a labour of love",
        ]

    def test_single_words_and_repeats_are_skipped(self) -> None:
        """A one-word quote is not a phrase; a phrase seen twice is kept once."""
        assert harvest_banned_phrases(
            ['"slow" and "watched pot"', "the **Watched pot** again"]
        ) == ["watched pot"]


class TestVoiceAnchor:
    def test_lived_first_person_excerpt_anchors(self) -> None:
        """A lived excerpt with first-person prose in two paragraphs is the anchor."""
        anchor = find_voice_anchor([excerpt("n.md", NARRATED), excerpt("v.md", LIVED)], TELL, 2)
        assert anchor is not None
        assert anchor.line() == "v.md — first-person body prose confirmed, 2 paragraphs"

    def test_third_person_and_guidance_never_anchor(self) -> None:
        """Narration, a tell, or a guidance file cannot anchor the voice."""
        told = "Avery reflects on the kiln.\n\n" + LIVED
        candidates = [
            excerpt("n.md", NARRATED),
            excerpt("t.md", told),
            excerpt("g.md", LIVED, "guidance"),
        ]
        assert find_voice_anchor(candidates, TELL, 2) is None

    def test_front_refuses_a_carbon_brief_without_anchor(self) -> None:
        """The brief's schema itself rejects voice_anchor MISSING for Carbon."""
        fields = dict(
            title="t",
            keyword_primary="k",
            slug="t",
            voice="Carbon",
            thread="x",
            created="now",
            voice_anchor="MISSING",
            banned_phrases=[],
            direct_hits=[],
            deep_cuts=[],
            sources=[{"file": "a.md"}],
            search_terms=[],
        )
        with pytest.raises(ValidationError, match="needs a voice anchor"):
            BriefFront(**fields)


class TestStep:
    def test_missing_anchor_writes_no_brief_and_says_what_to_supply(
        self, home: Home, tmp_path: Path
    ) -> None:
        """Carbon with no first-person lived excerpt: no file, and the three ways to supply one."""
        reply = brief(home, {"context": context(tmp_path), "excerpts": [excerpt("n.md", NARRATED)]})
        assert reply.data["written"] is False and reply.data["voice_anchor"] == "MISSING"
        assert not (tmp_path / "home" / "briefs").exists()
        for way in ("record a note", "point to a file", "dictate live"):
            assert way in reply.body

    def test_brief_is_written_with_anchor_and_banned_phrases(
        self, home: Home, tmp_path: Path
    ) -> None:
        """With an anchor, the brief is written with the exact anchor line and harvested phrases."""
        blaze = tmp_path / "kb" / "blaze.md"
        blaze.parent.mkdir()
        blaze.write_text('---\nrole: guidance\n---\nAvoid "the fullness of time".\n')
        data = {
            "context": context(tmp_path, blaze=str(blaze)),
            "excerpts": [
                excerpt("v.md", LIVED, kind="deep"),
                excerpt("g.md", GUIDANCE, "guidance"),
            ],
            "deep_cuts": [{"id": "row_1", "file": "v.md", "connection": "never names it"}],
            "terms": ["cure"],
        }
        reply = brief(home, data)
        path = Path(reply.data["path"])
        assert path == tmp_path / "home" / "briefs" / "waiting-is-part-of-the-work--exp-abc.md"
        text = path.read_text()
        assert "\nvoice_anchor: v.md — first-person body prose confirmed, 2 paragraphs\n" in text
        front = yaml.safe_load(text.split("---\n")[1])
        assert front["banned_phrases"] == [
            "patience is a virtue",
            "the slow craft movement",
            "a labour of love",
            "the fullness of time",
        ]
        assert LIVED in text  # the excerpt itself, verbatim
        assert "## Deep cuts\n\n### v.md\n" in text and "## Guidance\n\n### g.md\n" in text

    def test_blaze_frontmatter_phrases_are_banned_verbatim(
        self, home: Home, tmp_path: Path
    ) -> None:
        """The blaze's frontmatter `phrases` join banned_phrases as written, each once."""
        blaze = tmp_path / "kb" / "blaze.md"
        blaze.parent.mkdir()
        blaze.write_text(
            "---\nrole: guidance\nphrases:\n  - time heals all wounds\n"
            "  - Patience is a virtue\n  - watched pot\n---\n"
            'Avoid "the fullness of time" and the **watched pot**.\n'
        )
        data = {
            "context": context(tmp_path, blaze=str(blaze)),
            "excerpts": [excerpt("v.md", LIVED), excerpt("g.md", GUIDANCE, "guidance")],
        }
        reply = brief(home, data)
        assert reply.data["banned_phrases"] == [
            "patience is a virtue",
            "the slow craft movement",
            "a labour of love",
            "time heals all wounds",
            "watched pot",
            "the fullness of time",
        ]
        front = yaml.safe_load(Path(reply.data["path"]).read_text().split("---\n")[1])
        assert front["banned_phrases"] == reply.data["banned_phrases"]

    def test_other_voices_need_no_anchor(self, home: Home, tmp_path: Path) -> None:
        """A Silicon brief is written without a first-person excerpt."""
        reply = brief(
            home,
            {
                "context": context(tmp_path, voice="Silicon"),
                "excerpts": [excerpt("n.md", NARRATED)],
            },
        )
        assert reply.data["written"] is True and Path(reply.data["path"]).is_file()
        assert reply.data["voice_anchor"] == "none (not required for Silicon)"

    def test_nothing_confirmed_asks_a_carbon_brief_for_its_anchor(
        self, home: Home, tmp_path: Path
    ) -> None:
        """No confirmed excerpt at all: a Carbon brief is MISSING its anchor (the prompt, no
        file), not a failed step; another voice has nothing to brief and fails loud."""
        reply = brief(home, {"context": context(tmp_path), "excerpts": []})
        assert reply.data["written"] is False and reply.data["voice_anchor"] == "MISSING"
        assert "--anchor FILE" in reply.body and not list((tmp_path).rglob("*.md"))
        with pytest.raises(StepFailed, match="nothing to brief"):
            brief(home, {"context": context(tmp_path, voice="Silicon"), "excerpts": []})

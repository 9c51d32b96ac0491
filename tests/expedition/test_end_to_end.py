"""Whole runs in an in-memory room: the real pipeline, the real steps, the local seat."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agents.expedition.brief import find_voice_anchor
from agents.expedition.excerpts import tell_pattern
from agents.expedition.kb import read_document
from agents.home import Home
from room.errors import SeatError
from tests.expedition.conftest import DEMO_KB, MakeKb
from tests.expedition.sim import Sim, write_home
from tests.expedition.texts import document, index, paragraph

TITLE, KEYWORD = "Waiting Is Part of the Work", "patience"
DEMO_INDEX = DEMO_KB / "corpus_index.md"


def dig(sim: Sim, **request: object) -> list:
    sim.start(title=TITLE, keyword=KEYWORD, **request)
    return sim.settle()


class TestDemo:
    def test_dig_report_then_stop(self, demo_home: Home) -> None:
        """The demo run reaches a Dig Report whose deep cut never names the keyword, then stops.

        Each model step names the seat that answered, and whether it was a fallback, at the
        top of its reply data.
        """
        sim = Sim(demo_home)
        (report,) = dig(sim)
        assert report.data["key"] == "dig-report" and not report.data["final"]
        assert [c["file"] for c in report.data["deep_cuts"]] == [
            "voice-logs/2024-04-lime-mortar.md"
        ]
        assert "Deep cuts:\n- voice-logs/2024-04-lime-mortar.md (row_2) — " in report.body
        assert sim.asks_to("briefer") == [] and not sim.run().finished
        for scorer_reply in (
            m for m in sim.messages if m.from_ in ("termgen", "scorer", "scotoma")
        ):
            assert scorer_reply.data["seat"] == "local"
            assert scorer_reply.data["fallback_used"] is False

    def test_digest_files_are_rejected_or_resliced(self, demo_home: Home) -> None:
        """The all-digest file is flagged; the narrated file's excerpt starts below its narration."""
        sim = Sim(demo_home)
        (report,) = dig(sim)
        assert "[EXCERPT_DIGEST_REJECTED:digests/seasoning-oak.md]" in report.body
        potter = next(
            e for e in report.data["excerpts"] if e["file"].endswith("potter-apprenticeship.md")
        )
        assert potter["rejected_tell"] == 2 and potter["text"].startswith(
            "The first thing she had me do"
        )

    def test_confirm_writes_the_brief(self, demo_home: Home) -> None:
        """Confirming builds the brief with a real voice anchor and the guidance's banned phrases."""
        sim = Sim(demo_home)
        (report,) = dig(sim)
        sim.reply_to_report(report, "confirm")
        (result,) = sim.settle()
        assert result.data["final"] and result.data["outcome"] == "brief"
        text = Path(result.data["path"]).read_text()
        front = yaml.safe_load(text.split("---\n")[1])
        assert front["voice_anchor"].endswith("— first-person body prose confirmed, 3 paragraphs")
        assert "patience is a virtue" in front["banned_phrases"]
        assert front["deep_cuts"][0]["file"] == "voice-logs/2024-04-lime-mortar.md"

    def test_dropping_every_voice_leaves_the_anchor_missing(self, demo_home: Home) -> None:
        """With every first-person file dropped, no brief is written and the operator is told why."""
        sim = Sim(demo_home)
        (report,) = dig(sim)
        anchors = [a["id"] for a in report.data["voice_anchors"]]
        sim.reply_to_report(report, "confirm, drop " + " ".join(anchors))
        (result,) = sim.settle()
        assert result.data["outcome"] == "missing" and result.body.startswith(
            "voice_anchor: MISSING"
        )
        assert not (demo_home.root / "briefs").exists()

    def test_redirect_digs_again(self, demo_home: Home) -> None:
        """A redirect runs terms to excerpts again and posts a second Dig Report."""
        sim = Sim(demo_home)
        (report,) = dig(sim)
        sim.reply_to_report(report, "redirect kilns and firing")
        (second,) = sim.settle()
        assert (
            second.data["key"] == "dig-report@1" and "Redirected: kilns and firing" in second.body
        )
        terms_asks = sim.asks_to("termgen")
        assert [a.data["key"] for a in terms_asks] == ["terms", "terms@1"]

    def test_blaze_claims_reach_the_terms_prompt(self, demo_home: Home, demo_kb: Path) -> None:
        """The blaze's claims and named phrases are read in step 0 and shown to termgen."""
        sim = Sim(demo_home)
        dig(sim, blaze=str(demo_kb / "blaze-example.md"))
        context = next(m for m in sim.messages if m.from_ == "context").data["context"]
        assert (
            "Waiting is a job with its own tools, not an absence of work."
            in context["blaze_claims"]
        )
        assert "watched pot" in context["blaze_phrases"]
        termgen_prompt = next(r for r in sim.requests if r.step == "termgen").prompt
        assert "watched pot" in termgen_prompt


class TestFailures:
    def test_seat_failure_ends_the_run_loud(self, demo_home: Home) -> None:
        """When the judge cannot get a valid answer, the run ends with STEP_1 FAILED and its reason."""

        async def broken(role: str, request: object, schema: object) -> object:
            raise SeatError(
                "termgen: no valid answer from seat 'remote' (openai) after 2 attempts: bad JSON"
            )

        sim = Sim(demo_home, judge=broken)
        (result,) = dig(sim)
        assert result.data["final"] and result.body.startswith(
            "[STEP_1 FAILED — no valid termgen answer: termgen: no valid answer from seat 'remote'"
        )

    def test_missing_knowledge_base_fails_step_0(self, tmp_path: Path) -> None:
        """A home whose kb has no index fails at step 0, saying which setting to fix."""
        sim = Sim(write_home(tmp_path / "home", tmp_path / "nowhere"))
        (result,) = dig(sim)
        assert (
            result.body.startswith("[STEP_0 FAILED — the knowledge base")
            and "[expedition] kb" in result.body
        )

    def test_a_broken_index_fails_step_0_as_a_knowledge_base_error(
        self, tmp_path: Path, make_kb: MakeKb
    ) -> None:
        """An index that is not a table ends the run at step 0, naming it; no model is asked."""
        kb = make_kb({}, "# Index\n\nJust prose, no table.\n")
        sim = Sim(write_home(tmp_path / "home", kb))
        (result,) = dig(sim)
        assert result.body.startswith("[STEP_0 FAILED — the index ")
        assert str(kb / "corpus_index.md") in result.body and "Markdown table" in result.body
        assert sim.requests == [] and sim.asks_to("termgen") == []
        assert "seats.termgen" not in result.body

    def test_an_index_broken_after_step_0_fails_step_1_without_asking_a_model(
        self, tmp_path: Path
    ) -> None:
        """If the index breaks mid-run, step 1 reports the index's problem, not a seat's."""
        kb = tmp_path / "kb"
        kb.mkdir()
        (kb / "corpus_index.md").write_text(DEMO_INDEX.read_text(), encoding="utf-8")
        sim = Sim(write_home(tmp_path / "home2", kb))
        sim.start(title=TITLE, keyword=KEYWORD)
        (context_ask,) = sim.foreman()
        sim.answer(context_ask)
        (kb / "corpus_index.md").write_text("| a | b |\n|-|-|\n| 1 | 2 |\n", encoding="utf-8")
        (result,) = sim.settle()
        assert result.body.startswith("[STEP_1 FAILED — ")
        assert "corpus_index.md" in result.body and "no valid termgen answer" not in result.body
        assert sim.requests == []

    @pytest.mark.parametrize(
        ("content", "said"),
        [
            (b"\x00\xe3\x81\xff" * 4, "must be a UTF-8 Markdown file"),
            ("---\nrole: lived\n---\nI waited.\n", "role: lived"),
        ],
        ids=["binary", "lived"],
    )
    def test_a_bad_blaze_posted_to_the_room_fails_step_0_naming_it(
        self, demo_home: Home, tmp_path: Path, content: str | bytes, said: str
    ) -> None:
        """A run asked for in the room directly gets the same blaze check as the command."""
        blaze = demo_home.root / "kb" / "blaze.md"  # under the default blaze root
        blaze.parent.mkdir()
        if isinstance(content, bytes):
            blaze.write_bytes(content)
        else:
            blaze.write_text(content, encoding="utf-8")
        sim = Sim(demo_home)
        (result,) = dig(sim, blaze=str(blaze))
        assert result.body.startswith("[STEP_0 FAILED — the blaze file ")
        assert str(blaze) in result.body and said in result.body
        assert "UnicodeDecodeError" not in result.body

    def test_every_file_missing_fails_step_2_naming_them(
        self, tmp_path: Path, make_kb: MakeKb
    ) -> None:
        """An index whose files are all gone ends the run at step 2 with each missing file named."""
        kb = make_kb(
            {},
            index(
                [
                    ("gone.md", "Patience with glue left overnight", "clamps"),
                    ("lost.md", "Patience in the kiln overnight", "cooling"),
                ]
            ),
        )
        sim = Sim(write_home(tmp_path / "home", kb))
        (result,) = dig(sim)
        assert result.data["final"] and result.body.startswith("[STEP_2 FAILED — none of the 2")
        assert "[KB_FILE_MISSING:gone.md]" in result.body
        assert "[KB_FILE_MISSING:lost.md]" in result.body

    def test_bad_files_are_flagged_and_the_run_goes_on(
        self, tmp_path: Path, make_kb: MakeKb
    ) -> None:
        """A row naming a missing file and a file with no closing fence are flagged by name."""
        lived = document(
            "\n\n".join([paragraph(90), paragraph(90)]), summary="Glue left overnight."
        )
        kb = make_kb(
            {"a.md": lived, "broken.md": "---\nsummary: x\nno closing fence\n" + paragraph(200)},
            index(
                [
                    ("a.md", "Patience with glue left overnight to cure", "clamps overnight"),
                    ("broken.md", "Patience with varnish left overnight", "thin coats overnight"),
                    ("gone.md", "Patience in the kiln overnight", "cooling"),
                ]
            ),
        )
        sim = Sim(write_home(tmp_path / "home", kb))
        (report,) = dig(sim)
        assert report.data["key"] == "dig-report"
        for flag in (
            "[KB_FILE_MISSING:gone.md]",
            "[KB_FRONTMATTER_UNCLOSED:broken.md]",
            "[TERM_FANOUT_WEAK]",
        ):
            assert flag in report.body


def test_voice_anchor_of_the_demo_is_first_person(demo_kb: Path) -> None:
    """The demo's lime-mortar voice log passes the anchor gate on its own body."""
    document_, _ = read_document(demo_kb, "voice-logs/2024-04-lime-mortar.md")
    assert document_ is not None
    anchor = find_voice_anchor(
        [{"file": "lime.md", "role": document_.role, "text": document_.body}],
        tell_pattern(["Avery"], ["recounts"]),
        2,
    )
    assert anchor is not None and anchor.paragraphs == 4

"""The expedition finds what a model's words point at (issue 25).

Stemmed retrieval for natural, inflected phrases; a redirect's own words
searched; banned phrases harvested from plain-prose guidance; digest lines
naming someone the operator did not list flagged for review. Whole runs go
through the real pipeline and steps (the in-memory room of sim.py); the
natural-phrase model is a real program (tests/fakes/phrase_model.py), and
test_society.py runs it under a real hub and lurkers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agents.expedition.anchor import AnchorRefused, check_anchor
from agents.expedition.config import ExpeditionConfig
from agents.expedition.excerpts import unlisted_tellers
from agents.expedition.kb import IndexRow
from agents.expedition.phrases import harvest
from agents.expedition.prompts import termgen_request
from agents.expedition.retrieve import retrieve
from agents.expedition.stems import StemIndex
from tests.expedition.campaign import THEMES, run_campaign, write_kb
from tests.expedition.conftest import MakeKb
from tests.expedition.sim import Sim, write_home
from tests.expedition.texts import document, index, paragraph

VERBS = ("recounts", "reflects", "records", "describes")


def row(n: int, summary: str) -> IndexRow:
    return IndexRow(id=f"row_{n}", file=f"f{n}.md", summary=summary, keypoints="")


class TestStems:
    def test_inflected_phrases_match_their_words_in_any_order(self) -> None:
        """'swimming in cold water' finds 'cold-water swims'; a 3-word phrase may miss one word."""
        texts = [
            "Swims in the cold-water pond each winter; the bather's rituals of breath.",
            "Watering the tomato beds in July.",
            "A cold morning in the shed.",
        ]
        with StemIndex(texts) as index_:
            assert index_.matching("swimming in cold water") == {0}
            assert index_.matching("the rituals of winter bathing") == {0}  # 'bathing' missed
            assert index_.matching("numb hands") == set()
            assert index_.matching("the of and") == set()  # only stopwords: no stem signal

    def test_text_and_terms_cannot_change_a_query(self) -> None:
        """FTS syntax in a summary or a term is data: quotes, NEAR, stars and colons match as words."""
        texts = ['He said "NEAR(a b)" OR * body:x', "plain text"]
        with StemIndex(texts) as index_:
            assert index_.matching('said" OR body:*') == {0}
            assert index_.matching("NEAR") == {0}

    def test_retrieval_counts_a_term_once_by_either_signal(self) -> None:
        """Substring and stems are two signals for one term: prescore is still terms + structure."""
        rows = [row(1, "Swims in the cold-water pond"), row(2, "swimming in cold water daily")]
        found = retrieve(rows, ["swimming in cold water"], archetype=None, monomyth=None)
        by_id = {c["id"]: c for c in found}
        assert by_id["row_1"]["prescore"] == by_id["row_2"]["prescore"] == 1
        assert by_id["row_1"]["stemmed_terms"] == ["swimming in cold water"]
        assert by_id["row_2"]["stemmed_terms"] == []  # found as a substring

    def test_the_candidate_cap_is_unchanged(self) -> None:
        """However many rows the stems find, at most `cap` go on to be scored."""
        rows = [row(i, f"swims number {i} in cold water") for i in range(1, 61)]
        found = retrieve(rows, ["swimming in cold water"], archetype=None, monomyth=None, cap=40)
        assert len(found) == 40


def test_the_term_prompt_says_what_matches() -> None:
    """The termgen prompt tells a model its words are matched by their stems, any order."""
    prompt = termgen_request({"keyword_primary": "k", "title": "t"}).prompt
    said = " ".join(prompt.split("Inputs:")[0].split())
    assert "by its words, stemmed and in any order" in said


class TestCampaign:
    def test_natural_phrases_find_every_deep_cut(self, tmp_path: Path) -> None:
        """A model answering inflected phrases (a real program per judgment) finds all five
        deep cuts: each summary says the theme in its own inflections, never the phrase."""
        found = run_campaign(tmp_path, "phrases")
        assert {k: ok for k, (ok, _) in found.items()} == {t.keyword: True for t in THEMES}

    def test_the_deep_cuts_share_no_phrase_character_for_character(self) -> None:
        """The campaign is a fair test: no phrase is a substring of its own deep cut."""
        for theme in THEMES:
            summary = theme.deep_summary.lower()
            assert not any(p.lower() in summary for p in theme.phrases), theme.keyword


def redirect_kb(make_kb: MakeKb) -> Path:
    """Eight rows about endurance in rich words, one about cold water that never names it."""
    rows = [
        ("cold-water.md", "Swims in the cold-water pond before work each winter morning.", "-"),
        *[
            (f"e{i}.md", f"Endurance: {words}.", "-")
            for i, words in enumerate(
                [
                    "rebuilding the barn roof over a whole season of weekends",
                    "night lambing for a week and the toll on the body",
                    "walking the coast path in a gale with blistered feet",
                    "finishing the oak table after the lathe motor burned out",
                    "digging the allotment trench by hand through clay",
                    "restoring a loom frame joint by joint through the autumn",
                    "hauling firewood up the hill for the village hall",
                    "rowing the estuary against the tide with aching shoulders",
                ]
            )
        ],
    ]
    files = {name: document("\n\n".join([paragraph(90)] * 2)) for name, _, _ in rows}
    return make_kb(files, index(rows))


def test_a_redirect_searches_its_own_words(tmp_path: Path, make_kb: MakeKb) -> None:
    """With the built-in seat, redirecting to 'cold water' lists cold-water.md in the Dig Report,
    and 'cold water' is among the terms searched."""
    kb = redirect_kb(make_kb)
    sim = Sim(write_home(tmp_path / "home", kb))
    sim.start(title="Staying In", keyword="endurance")
    (first,) = sim.settle()
    assert "cold-water.md" not in first.body  # the keyword's own words never reach it
    sim.reply_to_report(first, "redirect cold water")
    (second,) = sim.settle()
    assert second.data["key"] == "dig-report@1"
    listed = [c["file"] for c in second.data["deep_cuts"] + second.data["direct_hits"]]
    assert "cold-water.md" in listed, second.body
    assert "cold water" in second.data["terms"]


BLAZE_PROSE = """---
role: guidance
---
# Blaze: Staying In

This piece is about staying in the water when everything says get out.

Slow is smooth and smooth is fast. The cold decides when you are done, not the clock.
A body keeps a promise the mind forgets.

- Nobody ever drowned in sweat.
- What does the cold teach?
"""


def test_prose_guidance_yields_banned_phrases(tmp_path: Path, make_kb: MakeKb) -> None:
    """A blaze whose aphorisms are ordinary sentences bans them, verbatim, in the brief."""
    kb = redirect_kb(make_kb)
    blaze = kb / "blaze.md"
    blaze.write_text(BLAZE_PROSE, encoding="utf-8")
    sim = Sim(write_home(tmp_path / "home", kb))
    sim.start(title="Staying In", keyword="endurance", blaze=str(blaze))
    (report,) = sim.settle()
    sim.reply_to_report(report, "confirm")
    (result,) = sim.settle()
    assert result.data["outcome"] == "brief", result.body
    front = yaml.safe_load(Path(result.data["path"]).read_text().split("---\n")[1])
    banned = front["banned_phrases"]
    assert "Slow is smooth and smooth is fast" in banned
    assert "A body keeps a promise the mind forgets" in banned
    assert "Nobody ever drowned in sweat" in banned
    assert not any("you" in p.split() or p.startswith("What does") for p in banned)


class TestHarvest:
    def test_prose_is_harvested_verbatim_and_stably(self) -> None:
        """Short sentences and clauses, as written; questions, 'you' and lists left out."""
        text = (
            "Measure twice and cut once. You should sand with the grain always. "
            "Why does oak split? Oak, ash, elm, beech and yew. "
            "It is a long paragraph that keeps going past twelve words and so is not one phrase; "
            "the wood decides when it is ready."
        )
        first = harvest([text])
        assert first == ["Measure twice and cut once", "the wood decides when it is ready"]
        assert harvest([text]) == first

    def test_marked_spans_come_first_and_a_sentence_holding_one_is_not_repeated(self) -> None:
        text = 'Never write "patience is a virtue" in a piece. Waiting is a kind of work.'
        assert harvest([text]) == ["patience is a virtue", "Waiting is a kind of work"]

    def test_headings_and_code_are_not_prose(self) -> None:
        text = "# The Long Wait For Glue\n\n```\nprint the cold water now\n```\n"
        assert harvest([text]) == []


NARRATED_BY_OTHER = "Jordan reflects on the winter swims and the pond at dawn.\n\n" + "\n\n".join(
    [paragraph(90), paragraph(90)]
)


class TestUnlistedNames:
    def test_the_names_found_are_the_unlisted_ones(self) -> None:
        text = (
            "Avery recounts the day.\nJordan reflects on it.\nHe describes it.\nMary Ann records."
        )
        assert unlisted_tellers(text, ["Avery"], VERBS) == ["Jordan", "Mary Ann"]
        assert unlisted_tellers(text, ["Avery", "jordan", "Mary Ann"], VERBS) == []

    def test_an_unlisted_teller_is_flagged_and_never_anchors(
        self, tmp_path: Path, make_kb: MakeKb
    ) -> None:
        """A lived file narrating 'Jordan' (not in operator_names) is flagged in the Dig Report
        for review and is not offered as a voice anchor; pointing at it is refused, saying why."""
        rows = [
            ("jordan.md", "Cold-water swims at dawn, with endurance, in the winter pond.", "-"),
            ("avery.md", "Endurance on the barn roof for a season.", "-"),
        ]
        kb = make_kb(
            {
                "jordan.md": document(NARRATED_BY_OTHER),
                "avery.md": document("\n\n".join([paragraph(90)] * 2)),
            },
            index(rows),
        )
        sim = Sim(write_home(tmp_path / "home", kb))
        sim.start(title="Staying In", keyword="endurance")
        (report,) = sim.settle()
        assert "[DIGEST_NAME_UNLISTED:jordan.md:Jordan]" in report.data["flags"]
        assert "[DIGEST_NAME_UNLISTED:jordan.md:Jordan]" in report.body
        anchors = [a["file"] for a in report.data["voice_anchors"]]
        assert "jordan.md" not in anchors and "avery.md" in anchors
        with pytest.raises(AnchorRefused, match=r"Jordan.*operator_names"):
            check_anchor(kb, "jordan.md", ExpeditionConfig(operator_names=["Avery"]))
        assert check_anchor(kb, "jordan.md", ExpeditionConfig(operator_names=["Avery", "Jordan"]))


def test_campaign_kb_indexes_every_file(tmp_path: Path) -> None:
    """Every row of the campaign's index names a file that exists."""
    kb = write_kb(tmp_path / "kb")
    files = [
        line.split("|")[1].strip() for line in (kb / "corpus_index.md").read_text().splitlines()[2:]
    ]
    assert files and all((kb / f).is_file() for f in files)

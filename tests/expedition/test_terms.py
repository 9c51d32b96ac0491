from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from agents.expedition.kb import load_index
from agents.expedition.steps import gen_terms
from agents.expedition.terms import (
    MAX_TERMS,
    MIN_TERMS,
    TERM_CHARS,
    WEAK_FLAG,
    TermsAnswer,
    anchor_words,
    check_terms,
    settle,
    terms_schema,
)
from agents.expedition.vocabulary import corpus_words
from agents.home import Home
from agents.seats.answerschema import answer_schema
from room.errors import StepFailed
from tests.expedition.conftest import DEMO_KB
from tests.expedition.sim import ScriptedJudge, ask, step_context

DEMO_CONTEXT = {  # step 1's input for the demo knowledge base
    "keyword_primary": "patience",
    "title": "Waiting Is Part of the Work",
    "blaze_phrases": [],
    "blaze_claims": [],
    "kb": str(DEMO_KB),
}
ANCHORS = anchor_words("patience", "Waiting Is Part of the Work", ["the watched pot"])
GOOD = [
    "cure",
    "overnight",
    "hessian",
    "frost",
    "clamps",
    "cold rise",
    "patience",
    "waiting",
    "slow work",
    "dry",
]
COSTUME = [
    "patience",
    "deep patience",
    "patient work",
    "waiting game",
    "part time",
    "the work",
    "cure",
]


class TestGate:
    def test_anchor_words_are_lowercase_content_words(self) -> None:
        """Anchors are split on non-letters, lowercased, and stripped of stopwords."""
        assert anchor_words("Slow-Craft", "The Art of It", ["the watched pot"]) == {
            "slow",
            "craft",
            "art",
            "watched",
            "pot",
        }

    def test_terms_sharing_a_word_do_not_fan_out(self) -> None:
        """'deep patience' shares 'patience'; 'Cure' and 'cure' are one term."""
        checked = check_terms(["deep patience", "Cure", "cure", "  hessian "], ANCHORS)
        assert checked.terms == ["deep patience", "Cure", "hessian"]
        assert checked.fanout == ["Cure", "hessian"] and checked.failing == ["deep patience"]

    def test_good_answer_passes(self) -> None:
        """Ten distinct terms, seven sharing no anchor word, pass both checks."""
        checked = check_terms(GOOD, ANCHORS)
        assert checked.count_ok and checked.fanout_ok and len(checked.fanout) == 7

    def test_count_outside_ten_to_twelve_fails(self) -> None:
        """Nine or thirteen terms fail the count even when all fan out."""
        assert not check_terms([f"term{c}" for c in "abcdefghi"], ANCHORS).count_ok
        assert not check_terms([f"term{c}" for c in "abcdefghijklm"], ANCHORS).count_ok

    def test_weak_result_is_flagged_not_padded(self) -> None:
        """After a failed retry the better answer is used as is, with TERM_FANOUT_WEAK."""
        first = check_terms(COSTUME, ANCHORS)
        retry = check_terms([*COSTUME, "frost", "hessian"], ANCHORS)
        terms, flags = settle(first, retry)
        assert terms == retry.terms and flags == [WEAK_FLAG]

    def test_passing_first_answer_stands(self) -> None:
        """A first answer that passes is kept and not flagged."""
        assert settle(check_terms(GOOD, ANCHORS), None) == (GOOD, [])

    def test_too_many_terms_drop_costume_terms_first(self) -> None:
        """Over twelve, terms sharing anchor words are dropped before fan-out terms."""
        many = [f"term{c}" for c in "abcdefghijk"] + ["patience one", "patience two"]
        terms, flags = settle(check_terms(many, ANCHORS), None)
        assert len(terms) == 12 and "patience two" not in terms and "termk" in terms
        assert flags == []


class TestCopied:
    def test_placeholders_key_names_and_small_words_are_dropped_and_named(self) -> None:
        """A term that hands back the prompt's placeholder, an input's key name or only small
        words is never searched; the retry is told which, and a term written with
        underscores is read with the spaces it meant."""
        anchors = anchor_words("patience", "Waiting Is Part of the Work")
        check = check_terms(
            ["<term>", "<term_2>", "keyword_primary", "the", "cold_water swims", "glue"],
            anchors,
            ("keyword_primary", "title"),
        )
        assert check.terms == ["cold water swims", "glue"]
        assert check.echoed == ["<term>", "<term_2>", "keyword_primary", "the"]
        assert "These are words of the prompt, not search terms" in check.problems()

    def test_the_retry_never_ends_on_an_empty_list(self) -> None:
        """Too few fan-out terms, none sharing a word: no 'These failed:' with nothing after."""
        check = check_terms(["glue", "clamps"], anchor_words("patience", "Waiting"))
        said = check.problems()
        assert "share one:" not in said and not said.rstrip().endswith(":"), said


class TestStep:
    def test_the_prompt_carries_the_corpus_words_near_the_theme(self, demo_home: Home) -> None:
        """Step 1 reads the index and hands the model the words its summaries use, those of
        rows naming the keyword first, never the keyword's own (agents/expedition/vocabulary.py)."""
        judge = ScriptedJudge({"termgen": [{"terms": GOOD}]})
        context = dict(DEMO_CONTEXT)
        asyncio.run(gen_terms(ask({"context": context}), step_context(demo_home, judge)))
        words = judge.requests[0].payload["corpus_words"]
        assert 0 < len(words) <= 40 and "patience" not in words and "patient" not in words
        assert all(w in judge.requests[0].prompt for w in words)

    def _context(self, demo_home: Home) -> dict[str, object]:
        return {
            "keyword_primary": "patience",
            "title": "Waiting Is Part of the Work",
            "blaze_phrases": [],
            "blaze_claims": [],
            "kb": str(DEMO_KB),  # step 1 reads the index before asking the seat
        }

    def test_retry_shows_the_failing_terms_then_proceeds_flagged(self, demo_home: Home) -> None:
        """A costume answer is retried once with its failing terms; a weak retry is flagged."""
        judge = ScriptedJudge({"termgen": [{"terms": COSTUME}, {"terms": [*COSTUME, "frost"]}]})
        reply = asyncio.run(
            gen_terms(ask({"context": self._context(demo_home)}), step_context(demo_home, judge))
        )
        assert len(judge.requests) == 2
        assert (
            "deep patience" in judge.requests[1].prompt
            and "patient work" in judge.requests[1].prompt
        )
        assert judge.requests[1].payload["avoid"] == [
            "patience",
            "deep patience",
            "patient work",
            "waiting game",
            "part time",
            "the work",
        ]
        assert reply.data is not None and reply.data["flags"] == [WEAK_FLAG]
        assert reply.data["seat"] == "scripted" and len(reply.data["judgments"]) == 2

    def test_good_first_answer_is_not_retried(self, demo_home: Home) -> None:
        """A passing answer costs one model call and carries no flag."""
        judge = ScriptedJudge({"termgen": [{"terms": GOOD}]})
        reply = asyncio.run(
            gen_terms(ask({"context": self._context(demo_home)}), step_context(demo_home, judge))
        )
        assert len(judge.requests) == 1 and reply.data is not None
        assert reply.data["terms"] == GOOD and reply.data["flags"] == []

    def test_no_terms_at_all_fails_loud(self, demo_home: Home) -> None:
        """Two empty answers fail the step instead of inventing terms."""
        judge = ScriptedJudge({"termgen": [{"terms": []}, {"terms": ["  "]}]})
        with pytest.raises(StepFailed, match="no usable terms"):
            asyncio.run(
                gen_terms(
                    ask({"context": self._context(demo_home)}), step_context(demo_home, judge)
                )
            )

    def test_prompt_contract(self, demo_home: Home) -> None:
        """The prompt starts with its step line and ends with the JSON instruction and the
        answer's shape, its places shown as placeholders."""
        judge = ScriptedJudge({"termgen": [{"terms": GOOD}]})
        asyncio.run(
            gen_terms(ask({"context": self._context(demo_home)}), step_context(demo_home, judge))
        )
        prompt = judge.requests[0].prompt
        assert prompt.startswith("step: termgen\n")
        assert (
            'Return ONLY valid JSON of this shape. No prose, no markdown fences.\n{"terms": '
            '["<term>"' in prompt
        )
        assert prompt.rstrip().endswith("10 to 12 different terms in all.")


def test_names_any_matches_word_starts_only() -> None:
    """A keyword is named by words starting with its stem, not by words containing it."""
    from agents.expedition.words import names_any

    assert names_any("She was patient with it", ["patience"])
    assert not names_any("Cut with the grain", ["rain"])


def test_a_lone_first_answer_beats_an_empty_retry() -> None:
    """When neither answer fans out, the one with more terms is kept, flagged."""
    first = check_terms(["patience"], ANCHORS)
    terms, flags = settle(first, check_terms([], ANCHORS))
    assert terms == ["patience"] and flags == [WEAK_FLAG]


class SchemaKeepingJudge(ScriptedJudge):
    """A ScriptedJudge that also keeps the schema each judgment was asked with."""

    def __init__(self, answers: dict[str, list[dict[str, Any]]]) -> None:
        super().__init__(answers)
        self.schemas: list[type[BaseModel]] = []

    async def __call__(self, role: str, request: Any, schema: Any) -> Any:
        self.schemas.append(schema)
        return await super().__call__(role, request, schema)


def test_a_term_written_twelve_times_is_retried_among_the_corpus_words(
    demo_home: Home,
) -> None:
    """SmolLM2 wrote the title in costume twelve times, twice (the campaign's *courage*): the
    retry's sent schema holds every term to one of the knowledge base's own words, which fan
    out and are found in a summary by construction."""
    anchors = anchor_words("patience", "Waiting Is Part of the Work")
    words = corpus_words(load_index(DEMO_KB).rows, anchors)
    judge = SchemaKeepingJudge(
        {"termgen": [{"terms": ["waiting work"] * 12}, {"terms": words[:MAX_TERMS]}]}
    )
    context = dict(DEMO_CONTEXT)
    reply = asyncio.run(gen_terms(ask({"context": context}), step_context(demo_home, judge)))
    first, retry = (answer_schema(schema).schema for schema in judge.schemas)
    assert "enum" not in first["properties"]["terms"]["items"]  # the first answer is free
    items = retry["properties"]["terms"]["items"]
    assert items["enum"] == words and len(words) >= MIN_TERMS
    assert "each term is one of corpus_words" in judge.requests[1].prompt
    assert reply.data is not None and reply.data["terms"] == words[:MAX_TERMS]
    assert reply.data["flags"] == [] and reply.data["gate_rescued"] is True


def test_the_choices_offered_are_distinct_and_no_longer_than_a_term() -> None:
    """A repeated word is offered once, a word longer than a term not at all; no words,
    the free schema."""
    schema = terms_schema(["frost", "Frost", "cure", "x" * (TERM_CHARS + 1)])
    sent = answer_schema(schema).schema["properties"]["terms"]
    assert sent["items"]["enum"] == ["frost", "cure"]
    assert (sent["minItems"], sent["maxItems"]) == (2, 2)  # as many as there are
    assert terms_schema([]) is TermsAnswer

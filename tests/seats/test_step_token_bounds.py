"""Every judged step's answer fits the max_tokens it asks for, and its prompt gives no answer away.

A step sends its schema whole to a schema-constraining server (llama.cpp turns it into a
grammar), so the worst answer the schema allows is the most a model can write: when that
is over the step's max_tokens, a small model that runs to every bound is cut off mid-JSON
and the answer is lost (SmolLM2 was, in 10 of 13 eval calls). So for each judged step of
each pipeline, at the largest inputs its configuration allows: nothing in the sent schema
is left unbounded or loosened, and its worst case is at most the request's max_tokens.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agents.backpass.ledger import Entry
from agents.backpass.memory import Bullet
from agents.backpass.prompts import analysis_request, synthesis_request
from agents.backpass.schemas import AnalysisAnswer, bind_synthesis
from agents.expedition.config import ExpeditionConfig
from agents.expedition.prompts import score_request, scotoma_request, termgen_request
from agents.expedition.scoring import scores_schema
from agents.expedition.scotoma import scotoma_schema
from agents.expedition.terms import TERM_CHARS, TermsAnswer, terms_schema
from agents.expedition.vocabulary import CORPUS_WORDS
from agents.packaged import defaults
from agents.runtime.step import JudgmentRequest
from agents.seats.answerschema import answer_schema, worst_case_tokens
from tests.expedition import campaign

LIMITS = ExpeditionConfig.model_fields
BATCH = LIMITS["batch_size"].metadata  # the bounds pydantic keeps for the field
TOP = LIMITS["top_for_scotoma"].metadata


def _largest(metadata: list[Any]) -> int:
    return max(int(getattr(bound, "le", 0) or 0) for bound in metadata)


def _rows(count: int) -> list[dict[str, Any]]:
    # Ids as long as retrieval makes them for a 500-row index: row_1 … row_500.
    return [
        {"id": f"row_{400 + n}", "summary": f"summary {n}", "embodies": 1} for n in range(count)
    ]


def _template(name: str) -> str:
    return (defaults() / "prompts" / f"{name}-prompt.md").read_text(encoding="utf-8")


def _entries(count: int) -> list[Entry]:
    return [
        Entry(open=True, kind="positive", text=f"lesson {n}", sightings=[("d", "s1"), ("d", "s2")])
        for n in range(count)
    ]


def _steps() -> list[tuple[str, JudgmentRequest, type[BaseModel]]]:
    batch = _rows(_largest(BATCH))
    top = _rows(_largest(TOP))
    bullets = [
        Bullet(id=f"PRV-{n:04d}", text=f"bullet {n}", start=n, end=n + 1) for n in range(200)
    ]
    entries = _entries(300)
    return [
        ("termgen", termgen_request({"keyword_primary": "k", "title": "t"}), TermsAnswer),
        (  # the retry: every term one of the corpus's words, the longest a term may be
            "termgen",
            termgen_request({"keyword_primary": "k", "title": "t"}, choose=True),
            terms_schema([f"{n:02d}" + "w" * (TERM_CHARS - 2) for n in range(CORPUS_WORDS)]),
        ),
        (
            "score",
            score_request("p", ["t"], batch, keyword="k"),
            scores_schema([r["id"] for r in batch]),
        ),
        ("scotoma", scotoma_request("p", "k", ["t"], top), scotoma_schema([r["id"] for r in top])),
        (
            "analysis",
            analysis_request(
                _template("analysis"), session="s", trace="x" * 5000, date="d", path="p"
            ),
            AnalysisAnswer,
        ),
        (
            "synthesis",
            synthesis_request(
                _template("synthesis"),
                date="d",
                entries=entries,
                public=[],
                private=bullets,
                min_sessions=2,
                cover_threshold=0.8,
            ),
            bind_synthesis([b.id for b in bullets], [e.id for e in entries]),
        ),
    ]


@pytest.mark.parametrize(
    ("step", "request_", "schema"), _steps(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_the_worst_answer_fits_the_max_tokens_asked(
    step: str, request_: JudgmentRequest, schema: type[BaseModel]
) -> None:
    sent = answer_schema(schema)
    assert sent.loosened == (), f"{step}: bounds dropped from its schema: {sent.loosened}"
    worst = worst_case_tokens(sent.schema)
    assert worst is not None, f"{step}: its schema leaves a string or an array unbounded"
    assert request_.max_tokens is not None and worst <= request_.max_tokens, (step, worst)


def test_an_unbounded_or_loosened_schema_is_said_so() -> None:
    """The estimate refuses to guess (None), and a dropped bound is named, not silent."""

    class Loose(BaseModel):
        text: str
        many: list[int]

    assert worst_case_tokens(answer_schema(Loose).schema) is None
    from agents.build.edits import CodeAnswer

    loosened = answer_schema(CodeAnswer).loosened
    assert any("content maxLength 524288" in bound for bound in loosened), loosened


def _step_case_answers(case: dict[str, Any]) -> list[str]:
    """What a step case expects a good answer to hold: the files its terms must find, the
    rows it wants scored high or chosen, the words and code it wants said, the ledger lines
    it wants cited (stepcases.py)."""
    expect, given = case.get("expect", {}), case.get("input", {})
    rows = {str(row.get("id")): row for row in given.get("rows") or []}
    found = [Path(str(f)).stem.replace("-", " ") for f in expect.get("find") or []]
    for key in ("high", "include"):
        found += [str(rows[i]["summary"]) for i in expect.get(key) or [] if i in rows]
    for key in ("mentions", "contains", "gone", "cites"):
        found += [str(v) for v in expect.get(key) or []]
    return found


def _case_answers() -> list[str]:
    """What the shipped suite's and the campaign's cases expect a good run to find."""
    found: list[str] = []
    for case in (defaults() / "eval").rglob("case.toml"):
        parsed = tomllib.loads(case.read_text(encoding="utf-8"))
        if parsed.get("kind") == "step":
            found += _step_case_answers(parsed)
            continue
        for value in parsed.get("expect", {}).values():
            found += [str(v) for v in (value if isinstance(value, list) else [value])]
    for theme in campaign.THEMES:
        found += [*theme.phrases, theme.deep_summary, Path(theme.deep_file).stem.replace("-", " ")]
    return [answer for answer in found if len(answer) > 3]


def _prompts() -> list[tuple[str, str]]:
    """Every step's prompt: the judged steps' above, the termgen retry's, and the build's
    spec writer's and code seat's (their sections filled with neutral words)."""
    from agents.build.prompts import CodeContext, code_prompt, testdesign_prompt
    from agents.build.repomap import RepoView

    job = {"language": "python", "spec_relative": "tests/test_x.py", "problem": "p",
           "contract": "c", "traps": "t", "constraints": "k", "targets": ["x.py"]}  # fmt: skip
    view = RepoView("x.py (1 line)", files={"x.py": "x = 1\n"})
    context = CodeContext(tier="t", iteration=1, kind="openai", spec_relative="tests/test_x.py",
                          spec_text="def test_x(): pass", last_output="1 failed", view=view)  # fmt: skip
    retry = termgen_request(
        {"keyword_primary": "k", "title": "t"}, avoid=["a"], problems="too few terms"
    )
    return [
        *((step, request_.prompt) for step, request_, _ in _steps()),
        ("termgen-retry", retry.prompt),
        ("testdesign", testdesign_prompt(job, view)),
        ("code", code_prompt(job, context)),
    ]


@pytest.mark.parametrize(("step", "prompt"), _prompts(), ids=lambda v: v if len(v) < 20 else "")
def test_no_prompt_gives_a_case_answer_away(step: str, prompt: str) -> None:
    """No illustration in a prompt may come from a case (the termgen prompt's 'swimming in
    cold water' was a campaign theme's deep cut, and a model copied it under another), nor
    from a step case's expected answer: every step's prompt, every shipped case."""
    folded = prompt.casefold()
    given = [answer for answer in _case_answers() if answer.casefold() in folded]
    assert given == [], f"the {step} prompt holds the answers of cases: {given}"


def test_the_step_cases_answers_are_checked() -> None:
    """The check above sees the step cases' answers, not only the run cases' (a test that
    read none would pass on any prompt)."""
    answers = _case_answers()
    assert "lime mortar" in " ".join(answers)  # a terms case's file to find
    assert "price - discount" in answers  # a code case's bug
    assert any("lockfile" in a for a in answers)  # an analysis case's mention

"""The schemas the judged steps send, as llama.cpp's grammar-constrained decoding meets them.

Straight to llama-server (no gateway, no society): each step's real request
and its `sent_schema` (the batch's ids, ten to twelve terms) must be taken
(`structured` stays "json_schema": no 400, no step-down) and must hold a
135M model's answer to the shape: valid JSON, only the ids given, as many
scores as rows. Whether the content passes the step's own gates is the
model's business, and the pipeline tests count it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from pydantic import BaseModel, ValidationError

from agents.expedition.prompts import score_request, scotoma_request, termgen_request
from agents.expedition.scoring import MAX_WHY_CHARS, scores_schema
from agents.expedition.scotoma import scotoma_schema
from agents.expedition.terms import MAX_TERMS, MIN_TERMS, TERM_CHARS, TermsAnswer
from agents.seats import OpenAISeat, OpenAISeatConfig
from agents.seats.answerschema import answer_schema
from agents.seats.jsonanswer import describe
from agents.seats.request import JudgmentRequest
from tests.realmodel.server import LlamaServer

PATTERN = "Waiting is part of the work: the slow step that cannot be rushed."
ROWS = [
    {"id": "row_1", "summary": "Clamps left on overnight so the glue can cure."},
    {"id": "row_2", "summary": "A kiln cooled overnight; opened early, the mugs cracked."},
    {"id": "row_3", "summary": "Pricing spoons at a Saturday market in the rain."},
]


def ask(llama: LlamaServer, request: JudgmentRequest, schema: type[BaseModel]) -> Any:
    config = OpenAISeatConfig.model_validate(
        {"kind": "openai", "base_url": llama.base_url, "model": "smol", "temperature": 0}
    )
    seat = OpenAISeat(request.step, config)
    sent = dataclasses.replace(request, answer_schema=answer_schema(schema))
    completion = asyncio.run(seat.answer(sent))
    assert completion.structured == "json_schema", completion
    answer = json.loads(completion.text)
    try:  # the step's own validators: counted for the baseline (docs/performance.md), not asserted
        schema.model_validate(answer)
        verdict = "passes its validators"
    except ValidationError as exc:
        verdict = f"misses: {describe(exc)}"
    print(f"{request.step}: {json.dumps(answer)[:300]} — {verdict}")
    return answer


def test_the_score_schema_holds_the_batchs_ids(llama: LlamaServer) -> None:
    """Scores keyed by the batch's ids: each id exactly once, in order, and no placeholder."""
    request = score_request(PATTERN, ["overnight", "cure"], ROWS, keyword="patience")
    answer = ask(llama, request, scores_schema([r["id"] for r in ROWS]))
    assert list(answer["scores"]) == ["row_1", "row_2", "row_3"], answer
    for score in answer["scores"].values():
        assert 0 <= score["embodies"] <= 3 and set(score) == {"embodies", "why"}
        assert "<" not in score["why"] and len(score["why"]) <= MAX_WHY_CHARS, score


def test_the_scotoma_schema_holds_the_rows_ids(llama: LlamaServer) -> None:
    request = scotoma_request(PATTERN, "patience", ["overnight"], ROWS)
    answer = ask(llama, request, scotoma_schema([r["id"] for r in ROWS]))
    assert len(answer["deep_cuts"]) <= 2 and set(answer) == {"deep_cuts"}, answer
    assert {cut["id"] for cut in answer["deep_cuts"]} <= {"row_1", "row_2", "row_3"}, answer


def test_the_terms_schema_holds_ten_to_twelve(llama: LlamaServer) -> None:
    """Ten to twelve short terms of plain words: never a placeholder or a key name."""
    context = {"keyword_primary": "patience", "title": "Waiting Is Part of the Work"}
    answer = ask(llama, termgen_request(context), TermsAnswer)
    assert MIN_TERMS <= len(answer["terms"]) <= MAX_TERMS, answer
    for term in answer["terms"]:
        assert isinstance(term, str) and len(term) <= TERM_CHARS, answer
        assert not set(term) & set("<>_{}"), answer

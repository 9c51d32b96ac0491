"""Scoring (step 3): summaries judged in batches, checked, then merged.

The model only ever sees `batch_size` summaries at once, so it is never
asked to read thirty and remember. An answer must score every id of its
batch exactly once, with `embodies` 0-3 and a `why` (kept to its first
twelve words); that check is part of the schema, so a bad answer is retried by the
judge like any other invalid JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agents.seats.placeholder import copied, plain_text

MAX_WHY_WORDS = 12
MAX_WHY_CHARS = 90  # what a schema-constraining server holds a why to: twelve plain words


class Score(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    embodies: int = Field(ge=0, le=3)
    why: str

    @field_validator("embodies", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("embodies must be an integer 0-3, not true/false")
        return value

    @field_validator("why")
    @classmethod
    def _short(cls, value: str) -> str:
        words = value.split()
        if not words:
            raise ValueError("why is empty; say in at most 12 words why this score")
        if copied(value):
            raise ValueError(
                f"why {value!r} is the prompt's placeholder; say in your own words why this score"
            )
        # A longer reason keeps its first twelve words: the report's bound holds, and a small
        # model's batch is not failed (and asked again) for a reason that ran on.
        return " ".join(words[:MAX_WHY_WORDS])


class ScoresAnswer(BaseModel):
    """A batch's scores; subclasses made by `scores_schema` also check id coverage."""

    model_config = ConfigDict(extra="ignore")
    expected_ids: ClassVar[tuple[str, ...]] = ()

    scores: list[Score]

    @model_validator(mode="before")
    @classmethod
    def _keyed(cls, value: Any) -> Any:
        """`{"scores": {"row_1": {"embodies": 2, "why": …}}}`, the shape a server is sent,
        as the list of scores the step keeps (a list is taken as it is)."""
        if isinstance(value, dict) and isinstance(value.get("scores"), dict):
            keyed = value["scores"]
            listed = [
                {**score, "id": row_id} if isinstance(score, dict) else score
                for row_id, score in keyed.items()
            ]
            return {**value, "scores": listed}
        return value

    @classmethod
    def sent_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        """What a schema-constraining server is sent (agents/seats/answerschema.py): the
        scores keyed by the batch's ids, each id once and in order (a grammar cannot score a
        row twice or leave one out), a short why; the validators still judge."""
        score = schema["$defs"]["Score"]
        score["properties"]["why"] = plain_text(MAX_WHY_CHARS)
        if cls.expected_ids:
            scored = {
                "type": "object",
                "properties": {k: v for k, v in score["properties"].items() if k != "id"},
            }
            schema["properties"]["scores"] = {
                "type": "object",
                "properties": {row_id: scored for row_id in cls.expected_ids},
            }
            del schema["$defs"]["Score"]
            if not schema["$defs"]:
                del schema["$defs"]
        return schema

    @model_validator(mode="after")
    def _every_id_once(self) -> ScoresAnswer:
        if not self.expected_ids:
            return self
        given = [score.id for score in self.scores]
        expected = set(self.expected_ids)
        repeated = sorted({i for i in given if given.count(i) > 1})
        unknown = sorted(set(given) - expected)
        missing = [i for i in self.expected_ids if i not in given]
        problems = []
        if missing:
            problems.append(f"missing ids {', '.join(missing)}")
        if repeated:
            problems.append(f"ids scored more than once {', '.join(repeated)}")
        if unknown:
            problems.append(f"ids not in this batch {', '.join(unknown)}")
        if problems:
            raise ValueError("score every id of the batch exactly once: " + "; ".join(problems))
        return self


def scores_schema(ids: Sequence[str]) -> type[ScoresAnswer]:
    """A ScoresAnswer that accepts only answers covering exactly `ids`."""
    return type(
        "ScoresAnswerForBatch",
        (ScoresAnswer,),
        {"expected_ids": tuple(ids), "__module__": __name__},
    )


def batches(candidates: Sequence[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """Candidates in runs of `size`, in order."""
    return [list(candidates[i : i + size]) for i in range(0, len(candidates), size)]


def merge(
    candidates: Iterable[dict[str, Any]], answers: Iterable[Iterable[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Candidates with their scores, by embodies then prescore (index order breaks ties).

    A candidate no batch scored is an error, not a zero: raise ValueError.
    """
    scored: dict[str, dict[str, Any]] = {}
    for answer in answers:
        for score in answer:
            scored[str(score["id"])] = score
    merged: list[tuple[int, int, int, dict[str, Any]]] = []
    for order, candidate in enumerate(candidates):
        found = scored.get(str(candidate["id"]))
        if found is None:
            raise ValueError(f"candidate {candidate['id']} was never scored")
        score = found
        row = {**candidate, "embodies": int(score["embodies"]), "why": str(score["why"])}
        merged.append((-row["embodies"], -int(candidate.get("prescore", 0)), order, row))
    merged.sort(key=lambda item: item[:3])
    return [row for *_, row in merged]

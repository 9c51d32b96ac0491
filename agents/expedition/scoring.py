"""Scoring (step 3): summaries judged in batches, checked, then merged.

The model only ever sees `batch_size` summaries at once, so it is never
asked to read thirty and remember. An answer must score every id of its
batch exactly once, with `embodies` 0-3 and a `why` of at most twelve
words; that check is part of the schema, so a bad answer is retried by the
judge like any other invalid JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_WHY_WORDS = 12


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
        if len(words) > MAX_WHY_WORDS:
            raise ValueError(f"why has {len(words)} words; use at most {MAX_WHY_WORDS}")
        return " ".join(words)


class ScoresAnswer(BaseModel):
    """A batch's scores; subclasses made by `scores_schema` also check id coverage."""

    model_config = ConfigDict(extra="ignore")
    expected_ids: ClassVar[tuple[str, ...]] = ()

    scores: list[Score]

    @classmethod
    def sent_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        """What a schema-constraining server is sent (agents/seats/answerschema.py): one
        score per id of the batch, only its ids, a short why; the validators still judge."""
        score = schema["$defs"]["Score"]["properties"]
        score["why"]["maxLength"] = 120
        if cls.expected_ids:
            scores = schema["properties"]["scores"]
            scores["minItems"] = scores["maxItems"] = len(cls.expected_ids)
            score["id"]["enum"] = list(cls.expected_ids)
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

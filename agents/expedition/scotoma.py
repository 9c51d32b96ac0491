"""The scotoma pick (step 4): the deep cut among the best-scored rows.

A deep cut embodies the pattern without naming its keyword: the file a
keyword search would never surface. The model sees only the top rows and
may pick none; an empty pick is a finding ("pattern may be new to corpus"),
not a failure. Its answer may only name rows it was shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_DEEP_CUTS = 2
PASS4_EMPTY_LINE = "Pass 4 empty; pattern may be new to corpus."


class DeepCut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    connection: str

    @field_validator("connection")
    @classmethod
    def _one_line(cls, value: str) -> str:
        line = " ".join(value.split())
        if not line:
            raise ValueError("connection is empty; state the non-obvious connection in one line")
        if len(line) > 300:
            raise ValueError("connection is over 300 characters; say it in one line")
        return line


class ScotomaAnswer(BaseModel):
    """Subclasses made by `scotoma_schema` also check the ids against the rows shown."""

    model_config = ConfigDict(extra="ignore")
    allowed_ids: ClassVar[tuple[str, ...]] = ()

    deep_cuts: list[DeepCut] = Field(max_length=MAX_DEEP_CUTS)
    direct_hits: list[str]
    pass4_empty: bool

    @classmethod
    def sent_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        """What a schema-constraining server is sent (agents/seats/answerschema.py): only the
        ids of the rows shown, a one-line connection; the validators still judge."""
        cut = schema["$defs"]["DeepCut"]["properties"]
        cut["connection"]["maxLength"] = 300
        if cls.allowed_ids:
            cut["id"]["enum"] = list(cls.allowed_ids)
            hits = schema["properties"]["direct_hits"]
            hits["items"]["enum"] = list(cls.allowed_ids)
            hits["maxItems"] = len(cls.allowed_ids)
        return schema

    @model_validator(mode="after")
    def _consistent(self) -> ScotomaAnswer:
        cut_ids = [cut.id for cut in self.deep_cuts]
        if len(set(cut_ids)) != len(cut_ids):
            raise ValueError("a deep cut is listed twice; list each row once")
        if len(set(self.direct_hits)) != len(self.direct_hits):
            raise ValueError("a direct hit is listed twice; list each row once")
        both = sorted(set(cut_ids) & set(self.direct_hits))
        if both:
            raise ValueError(
                f"{', '.join(both)} is both a deep cut and a direct hit; a deep cut does not "
                "name the keyword, a direct hit does: pick one"
            )
        if self.pass4_empty != (not self.deep_cuts):
            raise ValueError("pass4_empty must be true exactly when deep_cuts is empty")
        if self.allowed_ids:
            unknown = sorted(set(cut_ids + self.direct_hits) - set(self.allowed_ids))
            if unknown:
                raise ValueError(
                    f"ids {', '.join(unknown)} were not among the rows given; use only "
                    + ", ".join(self.allowed_ids)
                )
        return self


def scotoma_schema(ids: Sequence[str]) -> type[ScotomaAnswer]:
    """A ScotomaAnswer that accepts only ids among `ids`."""
    return type(
        "ScotomaAnswerForRows",
        (ScotomaAnswer,),
        {"allowed_ids": tuple(ids), "__module__": __name__},
    )


def top_rows(merged: Sequence[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The best `n` scored rows, trimmed to what the scotoma judgment needs."""
    keep = ("id", "file", "summary", "keypoints", "embodies", "why", "prescore")
    return [{k: row[k] for k in keep if k in row} for row in merged[:n]]


def chosen(
    merged: Sequence[dict[str, Any]], picked: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(direct hits, deep cuts, other relevant rows) from the merged rows and the pick.

    The other rows are every other retrieved candidate, best scored first:
    step 5 looks among them for further voice anchors, so a first-person
    voice log on this ground is found even when the scorer rated it 0.
    """
    by_id = {row["id"]: row for row in merged}

    def item(row_id: str, kind: str, **note: str) -> dict[str, Any]:
        row = by_id[row_id]
        return {"id": row_id, "file": row["file"], "summary": row["summary"], "kind": kind, **note}

    direct = [
        item(i, "direct", why=str(by_id[i].get("why", "")))
        for i in picked.get("direct_hits") or []
        if i in by_id
    ]
    deep = [
        item(c["id"], "deep", connection=str(c["connection"]))
        for c in picked.get("deep_cuts") or []
        if c["id"] in by_id
    ]
    taken = {entry["id"] for entry in direct + deep}
    others = [
        {k: row.get(k) for k in ("id", "file", "summary", "embodies", "why")}
        for row in merged
        if row["id"] not in taken
    ]
    return direct, deep, others

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

from agents.expedition.words import content_words, names_any
from agents.seats.placeholder import copied, plain_text

MAX_DEEP_CUTS = 2
MAX_CONNECTION = 200  # one line; what a schema-constraining server holds it to
DIRECT_MIN = 2  # the score a row naming the keyword needs to be a direct hit
DEEP_MIN = DIRECT_MIN  # and a row that does not, to be offered as a deep cut
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
        if copied(line):
            raise ValueError(
                f"connection {line!r} is the prompt's placeholder; say in your own words how "
                "the row embodies the pattern"
            )
        if len(line) > MAX_CONNECTION:
            raise ValueError(f"connection is over {MAX_CONNECTION} characters; say it in one line")
        return line


class ScotomaAnswer(BaseModel):
    """The model's pick among the rows that do not name the keyword: only deep cuts.

    Which top rows name the keyword is computed (`split_named`), not asked: they are the
    direct hits, and "pass 4 empty" is no deep cut. An answer written for the older prompt
    (with `direct_hits` and `pass4_empty`) is read for its deep cuts alone.
    Subclasses made by `scotoma_schema` also check the ids against the rows shown.
    """

    model_config = ConfigDict(extra="ignore")
    allowed_ids: ClassVar[tuple[str, ...]] = ()

    deep_cuts: list[DeepCut] = Field(max_length=MAX_DEEP_CUTS)

    @classmethod
    def sent_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        """What a schema-constraining server is sent (agents/seats/answerschema.py): only the
        ids of the rows shown, a one-line connection; the validators still judge."""
        cut = schema["$defs"]["DeepCut"]["properties"]
        cut["connection"] = plain_text(MAX_CONNECTION)
        schema["properties"]["deep_cuts"]["maxItems"] = MAX_DEEP_CUTS
        if cls.allowed_ids:
            cut["id"]["enum"] = list(cls.allowed_ids)
        return schema

    @field_validator("deep_cuts", mode="before")
    @classmethod
    def _once_each(cls, value: Any) -> Any:
        """A row picked twice is picked once (the first connection stands): a grammar cannot
        keep a model from repeating an id, and a repeat loses nothing."""
        if not isinstance(value, list):
            return value
        seen: set[Any] = set()
        kept = []
        for cut in value:
            key = cut.get("id") if isinstance(cut, dict) else id(cut)
            if key not in seen:
                seen.add(key)
                kept.append(cut)
        return kept

    @property
    def pass4_empty(self) -> bool:
        return not self.deep_cuts

    @model_validator(mode="after")
    def _consistent(self) -> ScotomaAnswer:
        cut_ids = [cut.id for cut in self.deep_cuts]
        if self.allowed_ids:
            unknown = sorted(set(cut_ids) - set(self.allowed_ids))
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


def names_keyword(row: dict[str, Any], keyword: str) -> bool:
    """Whether a row's summary or keypoints name the keyword (by its words' stems)."""
    key_words = content_words(keyword)
    text = f"{row.get('summary', '')}\n{row.get('keypoints', '')}"
    return bool(key_words) and names_any(text, key_words)


def split_named(
    rows: Sequence[dict[str, Any]], keyword: str
) -> tuple[list[str], list[dict[str, Any]]]:
    """(the direct hits' ids, the rows a deep cut may come from), in the rows' order.

    A direct hit is a well-scored row (embodies 2 or more) that names the keyword; a deep
    cut can only be an equally well-scored row that does not. Step 3 is the discrimination
    (the spec's words): a row it scored 0 or 1 (none, faint) does not embody the pattern,
    so it is not offered again. Both are facts the code can see, so the model is asked only
    the judgment left: which of the others are deep cuts, and what connects them.
    """
    direct, open_rows = [], []
    for row in rows:
        well_scored = int(row.get("embodies") or 0) >= DIRECT_MIN
        if names_keyword(row, keyword):
            if well_scored:
                direct.append(str(row["id"]))
        elif well_scored:
            open_rows.append(row)
    return direct, open_rows


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
        carried = {"sha256": row["sha256"]} if row.get("sha256") else {}  # its bytes' name
        return {
            "id": row_id,
            "file": row["file"],
            "summary": row["summary"],
            "kind": kind,
            **carried,
            **note,
        }

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
        {k: row.get(k) for k in ("id", "file", "summary", "embodies", "why", "sha256")}
        for row in merged
        if row["id"] not in taken
    ]
    return direct, deep, others

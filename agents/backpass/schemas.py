"""What the two model seats must answer, as pydantic models the judge validates.

Analysis (role `bulk`, one call per trace)::

    {"positive": [{"text": "...", "quote": "..."}], "negative": [...], "gaps": [...]}

Synthesis (role `synthesis`, one call per run)::

    {"edits": [{"repo": "private", "op": "add", "bullet": "PRV-004",
                "text": "...", "sources": ["L-1a2b3c4d"], "reason": "..."}],
     "summary": "..."}

`op` is `add` (a new bullet; `bullet`, when given, is the one it goes
after, else it goes after the file's last bullet), `replace` (the bullet's
text becomes `text`) or `remove`. A bullet id's prefix must match its repo
(`PUB-` public, `PRV-` private). `bind_synthesis` makes a schema that also
knows tonight's bullet and ledger ids, so an answer naming one that does not
exist is rejected, and the judge's retry tells the model which.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agents.seats.placeholder import copied

__all__ = [
    "KIND_OF_ARRAY",
    "AnalysisAnswer",
    "AnalysisItem",
    "Edit",
    "SynthesisAnswer",
    "bind_synthesis",
]

BULLET_ID = re.compile(r"(PUB|PRV)-\d{3,}")
LEDGER_ID = re.compile(r"L-[0-9a-f]{8}")
PREFIX_OF_REPO = {"public": "PUB", "private": "PRV"}
MAX_TEXT = 500

# What a schema-constraining server is sent (agents/seats/answerschema.py): bounds whose worst
# case fits the step's max_tokens (agents/backpass/prompts.py), so a small model that runs to
# every bound is never cut off mid-JSON. The validators stay as lenient as before: an answer
# from a seat that is not held to the schema is judged by them alone.
SENT_ITEMS_PER_KIND = 2
SENT_TEXT, SENT_QUOTE = 120, 160
SENT_EDITS, SENT_SOURCES, SENT_BULLET_TEXT, SENT_REASON, SENT_SUMMARY = 3, 4, 240, 100, 240

# The answer's arrays and the ledger kind of their items.
KIND_OF_ARRAY = {"positive": "positive", "negative": "negative", "gaps": "gap"}


class AnalysisItem(BaseModel):
    """One observation and the verbatim passage of the trace it rests on."""

    model_config = ConfigDict(extra="ignore")  # a model's extra "confidence" costs nothing

    text: str = Field(min_length=1, max_length=2000)
    quote: str = Field(max_length=4000)  # an empty quote is allowed here and dropped as missing

    @field_validator("text")
    @classmethod
    def _words(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text is blank; say the observation in one sentence")
        if copied(value):
            raise ValueError(
                f"text {value.strip()!r} is the prompt's placeholder; say the observation in "
                "your own words"
            )
        return value.strip()


class AnalysisAnswer(BaseModel):
    """The bulk seat's answer for one trace; all three arrays are required, empty is fine."""

    model_config = ConfigDict(extra="ignore")

    positive: list[AnalysisItem]
    negative: list[AnalysisItem]
    gaps: list[AnalysisItem]

    @classmethod
    def sent_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        """A few short observations of each kind: what fits the analysis' max_tokens."""
        item = schema["$defs"]["AnalysisItem"]["properties"]
        item["text"]["maxLength"], item["quote"]["maxLength"] = SENT_TEXT, SENT_QUOTE
        for array in KIND_OF_ARRAY:
            schema["properties"][array]["maxItems"] = SENT_ITEMS_PER_KIND
        return schema

    def items(self) -> list[dict[str, str]]:
        """Every item with its ledger kind, in answer order."""
        out: list[dict[str, str]] = []
        for array, kind in KIND_OF_ARRAY.items():
            for item in getattr(self, array):
                out.append({"kind": kind, "text": item.text, "quote": item.quote})
        return out


def _one_line(value: str) -> str:
    text = " ".join(value.split())
    for marker in ("- ", "* ", "+ "):
        text = text.removeprefix(marker)
    return text


class Edit(BaseModel):
    """One change to one memory file."""

    model_config = ConfigDict(extra="forbid")

    repo: Literal["public", "private"]
    op: Literal["add", "replace", "remove"]
    bullet: str | None = None
    text: str | None = None
    sources: list[str] = Field(default_factory=list, max_length=50)
    reason: str = Field(default="", max_length=1000)

    @field_validator("text")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = _one_line(value)
        if not text:
            raise ValueError("text is empty; give the bullet's words, one line")
        if len(text) > MAX_TEXT:
            raise ValueError(f"text is {len(text)} characters; keep a bullet under {MAX_TEXT}")
        return text

    @field_validator("sources")
    @classmethod
    def _sources(cls, value: list[str]) -> list[str]:
        for source in value:
            if not LEDGER_ID.fullmatch(source):
                raise ValueError(f"source {source!r} is not a ledger id like 'L-1a2b3c4d'")
        return value

    @model_validator(mode="after")
    def _shape(self) -> Edit:
        if self.bullet is not None:
            if not BULLET_ID.fullmatch(self.bullet):
                raise ValueError(f"bullet {self.bullet!r} is not an id like 'PUB-003' or 'PRV-012'")
            if not self.bullet.startswith(PREFIX_OF_REPO[self.repo] + "-"):
                raise ValueError(
                    f"bullet {self.bullet} is not in the {self.repo} memory; {self.repo} "
                    f"bullets are {PREFIX_OF_REPO[self.repo]}-nnn"
                )
        if self.op in ("replace", "remove") and self.bullet is None:
            raise ValueError(f"op {self.op!r} needs the bullet it changes, e.g. 'PRV-003'")
        if self.op in ("add", "replace") and self.text is None:
            raise ValueError(f"op {self.op!r} needs the bullet's text")
        return self


class SynthesisAnswer(BaseModel):
    """The synthesis seat's edits to both memory files, and a summary for the PR body."""

    model_config = ConfigDict(extra="forbid")

    edits: list[Edit] = Field(max_length=50)
    summary: str = Field(default="", max_length=4000)

    @field_validator("summary")
    @classmethod
    def _own_summary(cls, value: str) -> str:
        if copied(value) and value.strip():
            raise ValueError(
                f"summary {value.strip()!r} is the prompt's placeholder; write it for the "
                "person who reviews the edits, or leave it empty"
            )
        return value

    known_bullets: ClassVar[frozenset[str] | None] = None
    known_sources: ClassVar[frozenset[str] | None] = None

    @classmethod
    def sent_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        """A few short edits naming only tonight's ids: what fits the synthesis' max_tokens."""
        edit = schema["$defs"]["Edit"]["properties"]
        schema["properties"]["edits"]["maxItems"] = SENT_EDITS
        schema["properties"]["summary"]["maxLength"] = SENT_SUMMARY
        edit["sources"]["maxItems"] = SENT_SOURCES
        edit["reason"]["maxLength"] = SENT_REASON
        _bound_text(edit["text"], SENT_BULLET_TEXT)
        sources = sorted(cls.known_sources) if cls.known_sources is not None else None
        edit["sources"]["items"] = (
            {"type": "string", "enum": sources}
            if sources
            else {"type": "string", "maxLength": len("L-00000000")}
        )
        bullets = sorted(cls.known_bullets or ())
        if cls.known_bullets is not None and not bullets:
            # No bullet yet: the only edit there can be is an add after none. A model held to
            # the schema cannot copy the prompt's "PUB-nnn" as an id, nor replace or remove
            # what does not exist (SmolLM2 did both, in 4 of 5 synthesis step cases).
            edit["op"] = {"type": "string", "enum": ["add"]}
            edit["bullet"] = {"type": "null"}
            return schema
        named: dict[str, Any] = (
            {"type": "string", "enum": bullets}
            if bullets
            else {"type": "string", "maxLength": len("PRV-0000")}
        )
        edit["bullet"] = {"anyOf": [named, {"type": "null"}]}
        return schema

    @model_validator(mode="after")
    def _consistent(self) -> SynthesisAnswer:
        changed: set[str] = set()
        removed = {e.bullet for e in self.edits if e.op == "remove"}
        for number, edit in enumerate(self.edits):
            where = f"edits.{number}"
            if edit.op != "add" and edit.bullet is not None:
                if edit.bullet in changed:
                    raise ValueError(
                        f"{where}: bullet {edit.bullet} is changed twice; merge the two edits"
                    )
                changed.add(edit.bullet)
            if edit.op == "add" and edit.bullet in removed:
                raise ValueError(
                    f"{where}: adds after {edit.bullet}, which another edit removes; "
                    "name another bullet or none"
                )
            known = self.known_bullets
            if known is not None and edit.bullet is not None and edit.bullet not in known:
                raise ValueError(
                    f"{where}: bullet {edit.bullet} does not exist; the bullets are "
                    + (_sample(known) or "none yet (use op 'add' with no bullet)")
                )
            sources = self.known_sources
            if sources is not None:
                unknown = [s for s in edit.sources if s not in sources]
                if unknown:
                    raise ValueError(
                        f"{where}: sources {', '.join(unknown)} are not open ledger lines"
                    )
        return self

    def for_repo(self, repo: str) -> list[Edit]:
        return [edit for edit in self.edits if edit.repo == repo]


def _bound_text(node: dict[str, Any], bound: int) -> None:
    """`maxLength` on the string branch of an optional string's schema."""
    for option in node.get("anyOf", [node]):
        if option.get("type") == "string":
            option["maxLength"] = bound


def _sample(ids: Iterable[str], limit: int = 12) -> str:
    ordered = sorted(ids)
    text = ", ".join(ordered[:limit])
    return text + (f" and {len(ordered) - limit} more" if len(ordered) > limit else "")


def bind_synthesis(bullets: Iterable[str], sources: Iterable[str]) -> type[SynthesisAnswer]:
    """A SynthesisAnswer schema that rejects bullet and ledger ids this run does not have."""
    known_bullets = frozenset(bullets)
    known_sources = frozenset(sources)

    class BoundSynthesisAnswer(SynthesisAnswer):
        pass

    BoundSynthesisAnswer.known_bullets = known_bullets
    BoundSynthesisAnswer.known_sources = known_sources
    BoundSynthesisAnswer.__name__ = "SynthesisAnswer"
    BoundSynthesisAnswer.__qualname__ = "SynthesisAnswer"
    return BoundSynthesisAnswer

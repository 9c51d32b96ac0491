"""The save contract: what a post to @librarian carries in `data.save`, checked by pydantic.

    {"save": {"ns": "/bullpen/ops", "text": "...", "tags": ["release"],
              "source": "trace sha256:…", "supersedes": "m41"}}

`ns` and `text` are required; nothing is edited in place, so a correction is
a new entry naming the one it `supersedes`, and `retract: true` (with
`supersedes`) withdraws an entry without a replacement. `key` and `traces`
are what the backpass sync files a bullet under: the repository it came from
and the trace hashes its ledger lines cite.

An entry's id is `m<seq>`, the room seq of the post that saved it, so the
index is idempotent by seq and every host projecting one stream agrees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agents.memory.errors import Refused

__all__ = ["MAX_TEXT_BYTES", "Entry", "Save", "entry_id", "parse_save", "seq_of"]

MAX_TEXT_BYTES = 16 * 1024
_ID_HINT = "an entry id looks like m123 (the room seq of the save)"


def entry_id(seq: int) -> str:
    return f"m{seq}"


def seq_of(value: object) -> int:
    """The seq an entry id names; Refused for anything that is not one."""
    text = str(value).strip()
    if len(text) > 1 and text[0] == "m" and text[1:].isdigit():
        return int(text[1:])
    raise Refused(f"{text!r} is not an entry id; {_ID_HINT}")


class Save(BaseModel):
    """One entry as a poster hands it over."""

    model_config = ConfigDict(extra="forbid")

    ns: str
    text: str
    tags: list[str] = Field(default_factory=list, max_length=20)
    source: str | None = Field(default=None, max_length=1024)
    supersedes: str | None = None
    retract: bool = False
    key: str | None = Field(default=None, max_length=512)
    traces: list[str] = Field(default_factory=list, max_length=100)

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text is empty; say what the entry records")
        size = len(value.encode("utf-8"))
        if size > MAX_TEXT_BYTES:
            raise ValueError(
                f"text is {size} bytes; an entry holds at most {MAX_TEXT_BYTES} (16 KiB). "
                "Save a summary and name the full document in source"
            )
        return value.strip()

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        for tag in value:
            if not tag.strip() or len(tag) > 64 or "," in tag:
                raise ValueError(f"tag {tag!r} must be 1-64 characters without a comma")
        return [tag.strip() for tag in value]

    @field_validator("supersedes")
    @classmethod
    def _supersedes(cls, value: str | None) -> str | None:
        if value is not None:
            seq_of(value)
        return value


def parse_save(data: object) -> Save:
    """The `save` object of a post's data, checked; Refused names the first problem.

    The namespace is checked here for presence only; whether it is declared is
    the librarian's (and the CLI's) business, against society.toml."""
    if not isinstance(data, dict):
        raise Refused('a save carries a JSON object in data.save: {"ns": ..., "text": ...}')
    if not data.get("ns"):
        raise Refused(
            "the save names no namespace (ns): there is no default; give one under /bullpen, "
            "e.g. /bullpen/ops (`bullpen memory namespaces` lists them)"
        )
    try:
        save = Save.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "save"
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = (
                "unknown key; a save holds ns, text, tags, source, supersedes, retract, key, traces"
            )
        raise Refused(f"save.{where}: {message}") from None
    if save.retract and save.supersedes is None:
        raise Refused("a retraction (retract: true) must name the entry it withdraws in supersedes")
    return save


@dataclass(frozen=True)
class Entry:
    """One indexed entry with its provenance: the room seq and id of its save, and who saved it."""

    seq: int
    ns: str
    text: str
    saved_by: str
    msg_id: str
    ts: str
    tags: list[str] = field(default_factory=list)
    source: str | None = None
    key: str | None = None
    traces: list[str] = field(default_factory=list)
    supersedes: str | None = None
    superseded_by: str | None = None
    retracted: bool = False
    rank: float | None = None

    @property
    def id(self) -> str:
        return entry_id(self.seq)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "ns": self.ns,
            "text": self.text,
            "saved_by": self.saved_by,
            "seq": self.seq,
            "msg_id": self.msg_id,
            "ts": self.ts,
            "tags": list(self.tags),
            "source": self.source,
            "traces": list(self.traces),
        }
        for name in ("key", "supersedes", "superseded_by"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.retracted:
            out["retracted"] = True
        if self.rank is not None:
            out["rank"] = round(self.rank, 4)
        return out

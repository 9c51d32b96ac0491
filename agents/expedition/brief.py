"""The brief (step 6) and the two gates it must pass before it is written.

voice_anchor: a Carbon brief (a piece in the operator's own voice) needs a
confirmed lived excerpt that really is the operator speaking — first-person
prose in at least two paragraphs, with no third-person digest tell. Without
one, the brief is not written at all and the operator is told what to
supply; a brief with a fake anchor would be worse than none.

banned_phrases: guidance files name phrases the writing must not reuse; they
are copied verbatim from every guidance excerpt and from the blaze file (its
quoted and bold phrases, its short plain-prose sentences, and its
frontmatter `phrases` list as written; agents.expedition.phrases), so a
downstream checker can match them exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.expedition.excerpts import voice_paragraphs
from agents.expedition.phrases import harvest

ANCHORED_VOICES = frozenset({"carbon"})
VOICES = ("Carbon", "Si-C", "Silicon")
MISSING = "MISSING"

_SLUG_UNSAFE = re.compile(r"[^a-z0-9]+")


def needs_anchor(voice: str) -> bool:
    return voice.strip().lower() in ANCHORED_VOICES


def harvest_banned_phrases(texts: Iterable[str]) -> list[str]:
    """Marked spans, then short plain-prose sentences and clauses, verbatim, each once.

    See agents.expedition.phrases: guidance states many of its aphorisms as
    ordinary sentences, and those are what a writer would parrot.
    """
    return harvest(texts)


def banned_phrases(guidance: Iterable[str], blaze_phrases: Iterable[str] = ()) -> list[str]:
    """The brief's banned phrases: those harvested from guidance excerpts, then the blaze's.

    The blaze's phrases are kept as its operator wrote them, whatever their
    length; a phrase already banned (in any case) is not listed twice.
    """
    found = harvest_banned_phrases(guidance)
    seen = {phrase.lower() for phrase in found}
    for phrase in (p.strip() for p in blaze_phrases):
        if phrase and phrase.lower() not in seen:
            seen.add(phrase.lower())
            found.append(phrase)
    return found


@dataclass(frozen=True)
class VoiceAnchor:
    file: str
    paragraphs: int

    def line(self) -> str:
        return f"{self.file} — first-person body prose confirmed, {self.paragraphs} paragraphs"


def find_voice_anchor(
    excerpts: Sequence[dict[str, Any]], tell: re.Pattern[str], min_paragraphs: int
) -> VoiceAnchor | None:
    """The confirmed lived excerpt with the most first-person paragraphs, if any qualifies."""
    best: VoiceAnchor | None = None
    for excerpt in excerpts:
        n = voice_paragraphs(str(excerpt.get("role", "")), str(excerpt.get("text", "")), tell)
        if n >= min_paragraphs and (best is None or n > best.paragraphs):
            best = VoiceAnchor(str(excerpt["file"]), n)
    return best


def missing_prompt(title: str, min_paragraphs: int, thread: str = "THREAD") -> str:
    """What the operator is told when a Carbon brief has no voice anchor."""
    return (
        f"voice_anchor: {MISSING} — the brief for '{title}' was not written: no confirmed "
        f"role: lived excerpt has first-person prose in {min_paragraphs} or more paragraphs "
        "without third-person narration.\n"
        "Supply one:\n"
        "- record a note: a first-person voice log (role: lived) on this ground, added to "
        "the knowledge base and its index;\n"
        "- point to a file: a lived file of the knowledge base with your own first-person "
        f"prose, as its voice anchor: bullpen expedition confirm {thread} --anchor FILE;\n"
        "- dictate live: speak or type the anchor in the first person and save it as a "
        "voice log in the knowledge base.\n"
        "Or choose voice Si-C or Silicon, which need no anchor."
    )


class BriefFront(BaseModel):
    """The brief's frontmatter; a brief that does not validate is not written."""

    model_config = ConfigDict(extra="forbid")

    type: str = "expedition-brief"
    title: str = Field(min_length=1)
    keyword_primary: str = Field(min_length=1)
    slug: str = Field(min_length=1)
    voice: str
    archetype_primary: str | None = None
    monomyth_hint: str | None = None
    thread: str
    created: str
    voice_anchor: str
    banned_phrases: list[str]
    direct_hits: list[str]
    deep_cuts: list[dict[str, str]]
    sources: list[dict[str, Any]] = Field(min_length=1)
    search_terms: list[str]
    redirects: list[str] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _anchor(self) -> BriefFront:
        if self.voice not in VOICES:
            raise ValueError(f"voice {self.voice!r} is not one of {', '.join(VOICES)}")
        if needs_anchor(self.voice) and self.voice_anchor.startswith(MISSING):
            raise ValueError("a Carbon brief needs a voice anchor; it is MISSING")
        return self


def slugify(text: str) -> str:
    return _SLUG_UNSAFE.sub("-", text.lower()).strip("-")[:60] or "brief"


def brief_filename(slug: str, thread: str) -> str:
    """One file per run, so a retried step rewrites its own brief and no other."""
    return f"{slugify(slug)}--{slugify(thread)}.md"


def _section(heading: str, items: Sequence[dict[str, Any]], note_key: str, note: str) -> list[str]:
    if not items:
        return []
    lines = [f"## {heading}", ""]
    for item in items:
        lines += [f"### {item['file']}", ""]
        if item.get(note_key):
            lines += [f"{note}: {item[note_key]}", ""]
        lines += [str(item["text"]), ""]
    return lines


def _is_guidance(excerpt: dict[str, Any]) -> bool:
    return str(excerpt.get("role", "")).lower() == "guidance"


def render_brief(front: BriefFront, pattern: str, excerpts: Sequence[dict[str, Any]]) -> str:
    """The brief file: YAML frontmatter, then every confirmed excerpt verbatim.

    Deep cuts come first, whatever their role; guidance direct hits get their
    own section, since they steer the writing rather than feed it.
    """
    header = yaml.safe_dump(front.model_dump(), sort_keys=False, allow_unicode=True, width=10_000)

    def kind(name: str, guidance: bool | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in excerpts
            if e.get("kind") == name and (guidance is None or _is_guidance(e) == guidance)
        ]

    body = [f"# Brief: {front.title}", "", f"Pattern: {pattern}", ""]
    body += _section("Deep cuts", kind("deep"), "connection", "Connection")
    body += _section("Direct hits", kind("direct", guidance=False), "why", "Why")
    body += _section("Voice anchors", kind("voice"), "why", "Why")
    body += _section("Guidance", kind("direct", guidance=True), "why", "Why")
    return f"---\n{header}---\n\n" + "\n".join(body).rstrip() + "\n"

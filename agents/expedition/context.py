"""The expedition's context (step 0): the run's parameters and what the blaze says.

A blaze file is the operator's guidance for one piece (role: guidance). Its
claims and open questions seed term generation; its named phrases are
words a fan-out term must get away from, and the brief bans them. Both are
read from the YAML frontmatter (`claims`, `open_questions`, `phrases`) or
from the body's "Claims" / "Open questions" lists and its quoted or bold
phrases.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agents.expedition.brief import VOICES, harvest_banned_phrases, slugify

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*(?P<title>.+?)\s*#*\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?P<text>.+?)\s*$")
_SECTIONS = ("claim", "open question", "question")


def canonical_voice(voice: str) -> str:
    """'carbon', 'CARBON' and 'Carbon' are one voice; anything else is refused."""
    for known in VOICES:
        if voice.strip().lower() == known.lower():
            return known
    raise ValueError(f"voice {voice!r} is not one of {', '.join(VOICES)}; pick one of those")


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    return []


def blaze_parts(meta: dict[str, Any], body: str) -> tuple[list[str], list[str]]:
    """(claims and open questions, named phrases) of one blaze file."""
    claims = _as_list(meta.get("claims")) + _as_list(meta.get("open_questions"))
    in_section = False
    for line in body.splitlines():
        heading = _HEADING.match(line)
        if heading:
            in_section = any(s in heading["title"].lower() for s in _SECTIONS)
            continue
        item = _ITEM.match(line)
        if in_section and item:
            claims.append(item["text"])
    phrases = _as_list(meta.get("phrases")) + _as_list(meta.get("named_phrases"))
    phrases += harvest_banned_phrases([body])
    return _unique(claims), _unique(phrases)


def _unique(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    kept: list[str] = []
    for item in items:
        if item.lower() not in seen:
            seen.add(item.lower())
            kept.append(item)
    return kept


def pattern_sentence(
    title: str, keyword: str, archetype: str | None, redirects: Sequence[str] = ()
) -> str:
    """The one sentence each summary is scored against."""
    sentence = f"Files that embody {keyword!r}, the pattern of the piece titled {title!r}"
    if archetype:
        sentence += f", archetype {archetype!r}"
    if redirects:
        sentence += "; the operator redirects: " + " / ".join(redirects)
    return sentence + "."


def make_context(
    request: dict[str, Any],
    *,
    kb: str,
    briefs: str,
    blaze_path: str | None,
    blaze_claims: list[str],
    blaze_phrases: list[str],
) -> dict[str, Any]:
    """The context dict every later step reads; ValueError names a bad parameter."""
    title = str(request.get("title") or "").strip()
    keyword = str(request.get("keyword") or "").strip()
    if not title or not keyword:
        missing = " and ".join(n for n, v in (("title", title), ("keyword", keyword)) if not v)
        raise ValueError(f"the expedition needs a {missing}; pass --title and --keyword")
    archetype = str(request.get("archetype") or "").strip() or None
    monomyth = str(request.get("monomyth") or "").strip() or None
    return {
        "keyword_primary": keyword,
        "title": title,
        "slug": slugify(title),
        "voice": canonical_voice(str(request.get("voice") or "Carbon")),
        "archetype_primary": archetype,
        "monomyth_hint": monomyth,
        "blaze_path": blaze_path,
        "blaze_claims": blaze_claims,
        "blaze_phrases": blaze_phrases,
        "kb": kb,
        "briefs": briefs,
        "redirect": None,
        "pattern": pattern_sentence(title, keyword, archetype),
    }


def with_redirects(context: dict[str, Any], redirects: Sequence[str]) -> dict[str, Any]:
    """The context of a redirected dig: the operator's words join the pattern and the terms' seed."""
    if not redirects:
        return context
    return {
        **context,
        "redirect": " / ".join(redirects),
        "pattern": pattern_sentence(
            context["title"],
            context["keyword_primary"],
            context.get("archetype_primary"),
            redirects,
        ),
    }

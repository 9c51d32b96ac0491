"""The expedition's context (step 0): the run's parameters and what the blaze says.

The context is the one dict every later step reads: title, keyword, voice,
the structural hints, the knowledge base and briefs folders, and the
blaze's claims and named phrases (read and checked by
`agents.expedition.blaze`). A redirect adds the operator's words to it:
to the pattern every summary is scored against, to the termgen seat's
seed, and to the terms retrieval searches (`searched_terms`), so a
redirect to "cold water" finds the rows about cold water whatever terms a
seat derives from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents.expedition.brief import VOICES, slugify


def canonical_voice(voice: str) -> str:
    """'carbon', 'CARBON' and 'Carbon' are one voice; anything else is refused."""
    for known in VOICES:
        if voice.strip().lower() == known.lower():
            return known
    raise ValueError(f"voice {voice!r} is not one of {', '.join(VOICES)}; pick one of those")


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
        "redirects": [" ".join(r.split()) for r in redirects if r.strip()],
        "pattern": pattern_sentence(
            context["title"],
            context["keyword_primary"],
            context.get("archetype_primary"),
            redirects,
        ),
    }


def searched_terms(terms: Sequence[str], context: dict[str, Any]) -> list[str]:
    """The seat's terms, then each redirect's own words as a term of its own.

    The newest redirect comes first among them; one already among the terms
    (ignoring case and spacing) is not added twice.
    """
    out = list(terms)
    seen = {" ".join(t.lower().split()) for t in out}
    for redirect in reversed(context.get("redirects") or []):
        folded = " ".join(str(redirect).lower().split())
        if folded and folded not in seen:
            seen.add(folded)
            out.append(str(redirect))
    return out

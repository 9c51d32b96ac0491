"""The three judgment prompts, each one bounded JSON transform.

A remote seat sees only the prompt, so each is self-contained: what to
judge, the inputs, and the exact JSON to return. The same inputs travel as
`payload` for the built-in local seat. Inputs are embedded as JSON, never
spliced into prose, so nothing in a summary can change the instructions'
shape.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agents.expedition.terms import MAX_TERMS, MIN_FANOUT, MIN_TERMS
from agents.runtime.step import JudgmentRequest

RETURN_JSON = "Return ONLY valid JSON matching this schema. No prose, no markdown fences."

TERMS_SCHEMA = {"terms": ["string (10 to 12 items)"]}
SCORES_SCHEMA = {"scores": [{"id": "row_N", "embodies": "integer 0-3", "why": "at most 12 words"}]}
SCOTOMA_SCHEMA = {
    "deep_cuts": [{"id": "row_N", "connection": "one line"}],
    "direct_hits": ["row_N"],
    "pass4_empty": "boolean: true exactly when deep_cuts is empty",
}


# The most tokens each answer can need (JudgmentRequest.max_tokens): a seat asks for no
# more, so a weak model that runs on stops long before its seat's timeout.
TERMS_TOKENS = 400  # twelve short terms are about 150
SCORE_TOKENS_PER_ROW, SCORE_TOKENS_BASE = 60, 60  # an id, a digit, twelve words: about 40
SCOTOMA_TOKENS_PER_ROW, SCOTOMA_TOKENS_BASE = 10, 300  # two one-line cuts, the hits' ids


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1)


def _prompt(
    step: str, lines: Sequence[str], inputs: dict[str, Any], schema: Any, extra: str
) -> str:
    parts = [f"step: {step}", *lines]
    if extra.strip():
        parts += ["", "Guidance:", extra.strip()]
    parts += ["", "Inputs:", _dump(inputs), "", RETURN_JSON, _dump(schema)]
    return "\n".join(parts)


def termgen_request(
    context: dict[str, Any], *, avoid: Sequence[str] = (), problems: str = "", guidance: str = ""
) -> JudgmentRequest:
    """Step 1: concept-adjacent search terms for files that embody the pattern."""
    inputs = {
        "keyword_primary": context["keyword_primary"],
        "title": context["title"],
        "archetype_primary": context.get("archetype_primary"),
        "blaze_claims": context.get("blaze_claims", []),
        "blaze_phrases": context.get("blaze_phrases", []),
        "redirect": context.get("redirect") or None,
    }
    lines = [
        "Derive search terms for finding corpus files that EMBODY this pattern, not files",
        "that merely mention it: synonyms, causes, effects, physical images, opposites.",
        f"Give {MIN_TERMS} to {MAX_TERMS} short terms (one to three words each). At least "
        f"{MIN_FANOUT} must share NO word",
        "with the keyword, the title or the blaze phrases.",
        "Each term is matched against file summaries and keypoints by its words, stemmed and",
        "in any order ('swimming in cold water' finds 'cold-water swims'; a term of three or",
        "more words may miss one of them), and as a case-insensitive substring as well.",
        "Prefer plain words a summary would use; small words (the, of, in) are ignored.",
    ]
    if problems:
        lines += ["", "Your previous answer failed the check: " + problems]
    if avoid:
        lines += ["Do not reuse these terms: " + "; ".join(avoid)]
    payload = {**inputs, "avoid": list(avoid), "kb": context.get("kb")}
    return JudgmentRequest(
        "termgen",
        _prompt("termgen", lines, inputs, TERMS_SCHEMA, guidance),
        payload,
        max_tokens=TERMS_TOKENS,
    )


def score_request(
    pattern: str,
    terms: Sequence[str],
    rows: Sequence[dict[str, Any]],
    *,
    keyword: str,
    focus: str = "",
    redirects: Sequence[str] = (),
    guidance: str = "",
) -> JudgmentRequest:
    """Step 3: how strongly each summary of one batch embodies the pattern.

    `focus` (the title and any redirect) and `redirects` go to the local seat
    only: the pattern sentence already carries them for a model.
    """
    pairs = [{"id": row["id"], "summary": row["summary"]} for row in rows]
    inputs = {"pattern": pattern, "search_terms": list(terms), "rows": pairs}
    lines = [
        "Score how strongly each summary embodies the pattern: 0 none, 1 faint, 2 clear,",
        "3 exact. A summary can embody the pattern without naming its words.",
        "Score every id below exactly once; give a reason of at most 12 words.",
    ]
    payload = {**inputs, "keyword": keyword, "focus": focus, "redirects": list(redirects)}
    return JudgmentRequest(
        "score",
        _prompt("score", lines, inputs, SCORES_SCHEMA, guidance),
        payload,
        max_tokens=SCORE_TOKENS_BASE + SCORE_TOKENS_PER_ROW * len(pairs),
    )


def scotoma_request(
    pattern: str,
    keyword: str,
    terms: Sequence[str],
    rows: Sequence[dict[str, Any]],
    *,
    guidance: str = "",
) -> JudgmentRequest:
    """Step 4: the 0-2 deep cuts that embody the pattern without naming its keyword."""
    shown = [
        {k: row.get(k) for k in ("id", "file", "summary", "keypoints", "embodies", "why")}
        for row in rows
    ]
    inputs = {"pattern": pattern, "keyword": keyword, "rows": shown}
    lines = [
        "Among these best-scored rows, choose up to 2 deep cuts: rows that embody the",
        "pattern WITHOUT naming its keyword, each with the non-obvious connection in one",
        "line. List the strongest rows that do name it as direct hits. If no row",
        "qualifies as a deep cut, return deep_cuts empty and pass4_empty true.",
        "Use only the ids given.",
    ]
    payload = {**inputs, "terms": list(terms)}
    return JudgmentRequest(
        "scotoma",
        _prompt("scotoma", lines, inputs, SCOTOMA_SCHEMA, guidance),
        payload,
        max_tokens=SCOTOMA_TOKENS_BASE + SCOTOMA_TOKENS_PER_ROW * len(shown),
    )

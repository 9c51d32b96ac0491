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

from agents.expedition.scoring import MAX_WHY_WORDS
from agents.expedition.scotoma import MAX_DEEP_CUTS
from agents.expedition.terms import MAX_TERMS, MIN_FANOUT, MIN_TERMS
from agents.runtime.step import JudgmentRequest
from agents.seats.placeholder import placeholder

RETURN_JSON = "Return ONLY valid JSON of this shape. No prose, no markdown fences."

# Each answer's shape, shown with placeholders in angle brackets (agents/seats/placeholder.py):
# a small model copies what it is shown, and a copied placeholder fails the step's validator,
# where a copied example ("at most 12 words", "row_N") used to pass as an answer.
TERM, REASON, CONNECTION = placeholder("term"), placeholder("reason"), placeholder("connection")
TERMS_SHAPE = (
    f'{{"terms": ["{TERM}", "{TERM}", ...]}}',
    f"where each {TERM} is a search term of one to three plain words; {MIN_TERMS} to "
    f"{MAX_TERMS} different terms in all.",
)
# The inputs' key names: a term that hands one back is the prompt's word, not a search term.
TERMS_INPUT_KEYS = (
    "keyword_primary",
    "title",
    "archetype_primary",
    "blaze_claims",
    "blaze_phrases",
    "redirect",
    "corpus_words",
)

# The most tokens each answer can need (JudgmentRequest.max_tokens): the worst case of the
# schema sent (agents/seats/answerschema.py: worst_case_tokens), so an answer held to the
# schema is never cut off, and a weak model that runs to every bound stops long before its
# seat's timeout (tests/expedition/test_prompts.py checks each against its schema).
TERMS_TOKENS = 800  # twelve terms of 32 characters at most; a good answer is about 120
SCORE_TOKENS_PER_ROW, SCORE_TOKENS_BASE = 160, 20  # an id, a digit, a why of 90 characters
SCOTOMA_TOKENS_PER_CUT, SCOTOMA_TOKENS_BASE = 260, 40  # an id and a one-line connection


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1)


def _prompt(
    step: str, lines: Sequence[str], inputs: dict[str, Any], shape: Sequence[str], extra: str
) -> str:
    parts = [f"step: {step}", *lines]
    if extra.strip():
        parts += ["", "Guidance:", extra.strip()]
    parts += ["", "Inputs:", _dump(inputs), "", RETURN_JSON, *shape]
    return "\n".join(parts)


def termgen_request(
    context: dict[str, Any],
    *,
    avoid: Sequence[str] = (),
    problems: str = "",
    guidance: str = "",
    vocabulary: Sequence[str] = (),
    choose: bool = False,
) -> JudgmentRequest:
    """Step 1: concept-adjacent search terms for files that embody the pattern; `vocabulary`
    is the knowledge base's own words near the theme (agents/expedition/vocabulary.py), and
    with `choose` every term is to be one of them (the retry's schema: terms_schema)."""
    inputs = {
        "keyword_primary": context["keyword_primary"],
        "title": context["title"],
        "archetype_primary": context.get("archetype_primary"),
        "blaze_claims": context.get("blaze_claims", []),
        "blaze_phrases": context.get("blaze_phrases", []),
        "redirect": context.get("redirect") or None,
    }
    if vocabulary:
        inputs["corpus_words"] = list(vocabulary)
    lines = [
        "Derive search terms for finding corpus files that EMBODY this pattern, not files",
        "that merely mention it: synonyms, causes, effects, physical images, opposites.",
        f"Give {MIN_TERMS} to {MAX_TERMS} different short terms (one to three words each). At "
        f"least {MIN_FANOUT} must share NO word",
        "with the keyword, the title or the blaze phrases.",
        "Each term is matched against file summaries and keypoints by its words, stemmed and",
        "in any order (a term of three or more words may miss one of them), and as a",
        "case-insensitive substring as well. Prefer plain words a summary would use; small",
        "words (the, of, in) are ignored.",
    ]
    if vocabulary:
        lines += [
            "corpus_words are words the knowledge base's summaries use, those near the keyword",
            "first: a term that uses one of them can find a file.",
        ]
    if problems:
        lines += ["", "Your previous answer failed the check: " + problems]
    if avoid:
        lines += ["Do not reuse these terms: " + "; ".join(avoid)]
    if choose and vocabulary:
        lines += [
            "This time each term is one of corpus_words, each a different one: choose those",
            "closest to the pattern.",
        ]
    payload = {**inputs, "avoid": list(avoid), "kb": context.get("kb")}
    return JudgmentRequest(
        "termgen",
        _prompt("termgen", lines, inputs, TERMS_SHAPE, guidance),
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
    ids = [str(row["id"]) for row in rows]
    lines = [
        "Score how strongly each summary embodies the pattern: 0 none, 1 faint, 2 clear,",
        "3 exact. A summary can embody the pattern without naming its words.",
    ]
    shape = (
        '{"scores": {'
        + ", ".join(f'"{i}": {{"embodies": <0-3>, "why": "{REASON}"}}' for i in ids[:2])
        + (", ..." if len(ids) > 2 else "")
        + "}}",
        f"with one entry for each id, in this order: {', '.join(ids)}; <0-3> the score and "
        f"{REASON} why, in your own words, at most {MAX_WHY_WORDS} words.",
    )
    payload = {**inputs, "keyword": keyword, "focus": focus, "redirects": list(redirects)}
    return JudgmentRequest(
        "score",
        _prompt("score", lines, inputs, shape, guidance),
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
    """Step 4: the 0-2 deep cuts that embody the pattern without naming its keyword.

    `rows` are the best-scored rows that do not name the keyword (the step sorts out those
    that do, as direct hits, in code): the model only judges which of them embody it.
    """
    shown = [
        {k: row.get(k) for k in ("id", "file", "summary", "keypoints", "embodies", "why")}
        for row in rows
    ]
    inputs = {"pattern": pattern, "keyword": keyword, "rows": shown}
    lines = [
        "None of these best-scored rows names the keyword. Choose up to "
        f"{MAX_DEEP_CUTS} deep cuts:",
        "rows that embody the pattern all the same, each with its non-obvious connection in",
        "one line. Choose none when no row embodies it.",
    ]
    shape = (
        f'{{"deep_cuts": [{{"id": "<id>", "connection": "{CONNECTION}"}}]}}',
        f"with at most {MAX_DEEP_CUTS} entries (an empty list when none qualifies); each <id> "
        f"one of {', '.join(str(row['id']) for row in rows)}, and {CONNECTION} how that row "
        "embodies the pattern, in your own words, on one line.",
    )
    payload = {**inputs, "terms": list(terms)}
    return JudgmentRequest(
        "scotoma",
        _prompt("scotoma", lines, inputs, shape, guidance),
        payload,
        max_tokens=SCOTOMA_TOKENS_BASE + SCOTOMA_TOKENS_PER_CUT * MAX_DEEP_CUTS,
    )

"""Retrieval (step 2): every term against every summary and keypoints cell.

A term matches a row by either of two signals. The spec's own: a
case-insensitive substring of the summary or keypoints, so what a term
finds is obvious to anyone reading the index. And what the term means:
its words, stemmed, in any order (agents.expedition.stems), so a model's
"swimming in cold water" finds a row about "cold-water swims". Each term
counts once, whichever signal found it. Rows that also sit where the piece
sits structurally (its archetype/category and monomyth stage) get two extra
points, and only the best `cap` go on to be scored, keeping step 3 bounded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agents.expedition.kb import IndexRow
from agents.expedition.stems import StemIndex
from agents.expedition.words import fold

STRUCTURAL_BONUS = 2
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_LEADING_NUMBER = re.compile(r"^\s*(\d+)")


def _norm(text: str) -> str:
    return _NON_ALNUM.sub(" ", text.lower()).strip()


def _hint_matches(hint: str, cell: str) -> bool:
    """A hint matches a cell it is part of, or a stage with the same number."""
    hint_n, cell_n = _norm(hint), _norm(cell)
    if not hint_n or not cell_n:
        return False
    if f" {hint_n} " in f" {cell_n} ":
        return True
    hint_num, cell_num = _LEADING_NUMBER.match(hint), _LEADING_NUMBER.match(cell)
    return bool(hint_num and cell_num and int(hint_num[1]) == int(cell_num[1]))


def structural_match(row: IndexRow, archetype: str | None, monomyth: str | None) -> bool:
    """Whether every structural hint given matches; no hints, no structural match."""
    checks: list[bool] = []
    if archetype:
        checks.append(_hint_matches(archetype, f"{row.category} | {row.archetype}"))
    if monomyth:
        checks.append(_hint_matches(monomyth, row.monomyth))
    return bool(checks) and all(checks)


def row_text(row: IndexRow) -> str:
    """What a term is matched against: the summary and keypoints cells, never the tags."""
    return f"{row.summary}\n{row.keypoints}"


def matched_terms(row: IndexRow, terms: Iterable[str]) -> list[str]:
    """The terms found in the row as case-insensitive substrings (the spec's signal)."""
    haystack = fold(row_text(row))
    return [term for term, folded in _folded(terms) if folded in haystack]


def _folded(terms: Iterable[str]) -> list[tuple[str, str]]:
    """(term, its folded form) for every term that folds to something."""
    return [(term, folded) for term in terms if (folded := fold(term))]


def retrieve(
    rows: Iterable[IndexRow],
    terms: list[str],
    *,
    archetype: str | None,
    monomyth: str | None,
    cap: int | None = None,
) -> list[dict[str, object]]:
    """Candidate rows, best prescore first (index order breaks ties), at most `cap`."""
    rows = list(rows)
    folded = _folded(terms)
    with StemIndex([row_text(row) for row in rows]) as index:
        by_stem = index.terms_of(terms)
    found: list[tuple[int, int, list[str], list[str], bool]] = []
    for order, row in enumerate(rows):
        haystack = fold(row_text(row))
        exact = {term for term, form in folded if form in haystack}
        stemmed = [t for t in terms if t in by_stem[order] and t not in exact]
        hits = [t for t in terms if t in exact or t in by_stem[order]]
        structural = structural_match(row, archetype, monomyth)
        if not hits and not structural:
            continue
        prescore = len(hits) + (STRUCTURAL_BONUS if structural else 0)
        found.append((-prescore, order, hits, stemmed, structural))
    found.sort(key=lambda item: (item[0], item[1]))
    return [
        {
            **rows[order].as_dict(),
            "prescore": -negative,
            "matched_terms": hits,
            "stemmed_terms": stemmed,  # found by their words' stems only, not as substrings
            "structural": structural,
        }
        for negative, order, hits, stemmed, structural in found[:cap]
    ]

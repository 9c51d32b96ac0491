"""The phrases a writer would parrot from guidance, harvested verbatim.

Guidance marks some phrases itself: quoted, bold or italic spans ("patience
is a virtue", **watched pot**). Much of it does not: a blaze or a style note
states its aphorisms as ordinary sentences ("A material keeps moving after
it looks done. Slow is smooth and smooth is fast."), and those are exactly
what a writer handed the guidance lifts whole into the piece. So a short
sentence of guidance, or a short clause of a longer one, is a phrase too:

- 4 to 12 words, cut at sentence ends and at `;`, `:` and dashes;
- a statement, not a question;
- not addressed to the writer (no "you"/"your": an instruction is obeyed,
  not quoted);
- not a list (two or more commas) and not already carrying a marked span
  (the span is the phrase).

Headings, code and list markers are not prose. Both harvests copy the text
as written (only trailing punctuation is trimmed), so the same guidance
always yields the same list, and a checker can match it exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

__all__ = ["harvest", "prose_phrases", "spans"]

MIN_WORDS, MAX_WORDS = 2, 10  # a marked span
PROSE_MIN_WORDS, PROSE_MAX_WORDS = 4, 12  # an unmarked sentence or clause

_SPANS = re.compile(
    r"\"(?P<dq>[^\"\n]+)\""
    r"|“(?P<curly>[^”\n]+)”"
    r"|\*\*(?P<bold>[^*\n]+)\*\*"
    r"|(?<![\w*])\*(?P<star>[^*\n]+)\*(?![\w*])"
    r"|(?<![\w_])_(?P<under>[^_\n]+)_(?![\w_])"
)
_MARKS = re.compile(r"[\"“”*_`]")
_SENTENCE = re.compile(r"(?<=[.!?])[\"'’”)\]]*\s+|\s*[;:]\s+|\s+[—–-]{1,2}\s+|\s*—\s*")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_YOU = re.compile(r"\b(?:you|your|yours|yourself|yourselves)\b", re.IGNORECASE)
_TRIM = ".,;:!?…\"'’”) "


def spans(text: str) -> Iterator[str]:
    """Quoted, bold or italic spans of MIN_WORDS to MAX_WORDS words, as written."""
    for match in _SPANS.finditer(text):
        phrase = next(g for g in match.groups() if g is not None).strip().rstrip(".,;:!?")
        if MIN_WORDS <= len(phrase.split()) <= MAX_WORDS:
            yield phrase


def _prose_lines(text: str) -> Iterator[str]:
    """Each paragraph (or list item) of prose as one line; headings and code left out."""
    fenced = False
    block: list[str] = []
    for raw in [*text.splitlines(), ""]:
        line = raw.strip()
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith(("#", "<!--", "|")):
            continue
        if not line or _ITEM.match(raw):
            if block:
                yield " ".join(block)
            block = [_ITEM.sub("", raw).strip()] if line else []
            continue
        block.append(line)


def prose_phrases(text: str) -> Iterator[str]:
    """Short unmarked sentences and clauses of guidance, as written (see the module)."""
    for line in _prose_lines(text):
        for piece in _SENTENCE.split(line):
            phrase = piece.strip().rstrip(_TRIM).lstrip("\"'“(‘ ")
            if not PROSE_MIN_WORDS <= len(phrase.split()) <= PROSE_MAX_WORDS:
                continue
            if piece.rstrip().endswith("?") or _MARKS.search(phrase) or _YOU.search(phrase):
                continue
            if phrase.count(",") >= 2:
                continue
            yield phrase


def harvest(texts: Iterable[str], *, prose: bool = True) -> list[str]:
    """Every text's marked spans, then (with `prose`) its short sentences; each phrase once."""
    texts = list(texts)
    found: list[str] = []
    seen: set[str] = set()
    sources = [spans(t) for t in texts] + ([prose_phrases(t) for t in texts] if prose else [])
    for source in sources:
        for phrase in source:
            if phrase.lower() not in seen:
                seen.add(phrase.lower())
                found.append(phrase)
    return found

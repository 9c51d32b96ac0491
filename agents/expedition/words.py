"""Words as the gates see them: lowercase letters only, stopwords removed.

The term fan-out gate, retrieval and the local seat must agree on what a
"word" is, or a term would pass one check and fail another; this is that
single definition.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each even ever few
    for from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just let like made make many may me might more most much must my
    myself never no nor not now of off on once one only or other our ours ourselves out over own
    same shall she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up upon us very was we were what when where
    which while who whom why will with within without would yet you your yours yourself
    yourselves get gets got every still thing things way ways left took put came went done
    kept keep gave give goes going
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_LETTERS = re.compile(r"[a-z]+")
_SPACE = re.compile(r"\s+")


def letters(text: str) -> list[str]:
    """Every run of letters, lowercased: the spec's 'split on non-alpha'."""
    return _LETTERS.findall(text.lower())


def content_words(text: str) -> list[str]:
    """Lowercase letter runs that are not stopwords, in order, repeats kept."""
    return [w for w in letters(text) if w not in STOPWORDS and len(w) > 1]


def word_set(texts: Iterable[str]) -> set[str]:
    """The content words of several texts together."""
    found: set[str] = set()
    for text in texts:
        found.update(content_words(text))
    return found


def fold(text: str) -> str:
    """Lowercase with runs of whitespace folded to one space, for substring matching."""
    return _SPACE.sub(" ", text.lower()).strip()


def stem(word: str) -> str:
    """A crude prefix stem, so 'patient' and 'patiently' count as naming 'patience'."""
    return word if len(word) <= 5 else word[: max(5, len(word) - 3)]


def names_any(text: str, words: Iterable[str]) -> bool:
    """Whether a word of `text` starts with the stem of any of `words` (case-insensitive).

    'patient' names 'patience'; 'grain' does not name 'rain'.
    """
    folded = text.lower()
    return any(re.search(rf"\b{re.escape(stem(w))}", folded) for w in words)

"""The knowledge base's own words near a theme, for the term prompt.

Terms find files only through the words of the index's summaries and
keypoints (step 2). A model that has never seen the corpus guesses at them,
and a weak one guesses words no summary uses: the search finds nothing and
the run ends before a Dig Report. So the term prompt also carries the
corpus's own vocabulary, ranked by pseudo-relevance feedback (the classic
retrieval trick): words of the rows that name the keyword, title or blaze
phrases come first, then the words the corpus uses most. A model may build
its terms from them or not; the fan-out gate judges the terms as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from agents.expedition.kb import IndexRow
from agents.expedition.words import content_words, names_any

__all__ = ["CORPUS_WORDS", "corpus_words"]

CORPUS_WORDS = 40  # enough to ground a dozen terms, few enough to keep the prompt small
_NEAR_WEIGHT = 3  # a word of a row near the theme counts three times a word elsewhere


def corpus_words(
    rows: Iterable[IndexRow], anchors: set[str], limit: int = CORPUS_WORDS
) -> list[str]:
    """Up to `limit` content words of the rows' summaries and keypoints, those of the rows
    naming an anchor word first, never an anchor itself (a term must fan out from those)."""
    counts: Counter[str] = Counter()
    anchor_like: dict[str, bool] = {}  # a word's verdict, once: a corpus repeats its words
    for row in rows:
        words = set(content_words(f"{row.summary}\n{row.keypoints}"))
        for word in words - anchor_like.keys():
            anchor_like[word] = word in anchors or names_any(word, anchors)
        # names_any over the row's own words: what it would find in the text, word by word
        near = any(anchor_like[word] for word in words)
        for word in words:
            if len(word) > 2 and not anchor_like[word]:
                counts[word] += _NEAR_WEIGHT if near else 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [word for word, _ in ranked[:limit]]

"""Matching by what a term means: its words, stemmed, in any order.

A model asked for search terms answers the way people talk: "swimming in
cold water", "the rituals of winter bathing". A plain substring test finds
neither in a summary that says "cold-water swims" or "a winter bather's
ritual", so retrieval used to miss the very rows the terms point at. Here
every text is indexed by SQLite FTS5's `porter` tokenizer (in memory, built
per run from the rows in hand), so "swimming", "swims" and "swim" are one
word and "cold-water" is two.

A term matches a text that holds its content words (the gates' words:
letters only, stopwords dropped; agents.expedition.words), stemmed, in any
order and anywhere in the text. A term of three or more content words may
miss one of them: a phrase a model writes carries a word or two of its own
("the rituals of winter bathing" still points at a row about winter bathing
that never says "ritual"). A term made only of stopwords matches nothing by
this signal; the substring test still applies to it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from agents.expedition.words import content_words

__all__ = ["StemIndex", "needed", "term_words"]

TOKENIZER = "porter unicode61 remove_diacritics 2"


def term_words(term: str) -> list[str]:
    """A term's distinct content words, in order."""
    return list(dict.fromkeys(content_words(term)))


def needed(count: int) -> int:
    """How many of a term's `count` content words a text must hold: all, or all but one from 3."""
    return count if count <= 2 else count - 1


class StemIndex:
    """Some texts, indexed by stemmed word; which of them each term matches.

    One in-memory database per index, closed with the index (`with` or
    `close`). Texts are data only: they are bound as parameters, and a query
    is built from a term's letters alone, each quoted, so nothing a summary
    or a term says can change a query's shape.
    """

    def __init__(self, texts: Sequence[str]) -> None:
        self._db = sqlite3.connect(":memory:")
        self._db.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{TOKENIZER}')")
        self._db.executemany(
            "INSERT INTO t(rowid, body) VALUES (?, ?)",
            ((n, text) for n, text in enumerate(texts)),
        )
        self._size = len(texts)
        self._cache: dict[str, frozenset[int]] = {}

    def __enter__(self) -> StemIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def holding(self, word: str) -> frozenset[int]:
        """The texts (by position) holding `word` or another word with its stem."""
        if word not in self._cache:
            found = self._db.execute("SELECT rowid FROM t WHERE t MATCH ?", (f'"{word}"',))
            self._cache[word] = frozenset(row[0] for row in found)
        return self._cache[word]

    def matching(self, term: str) -> frozenset[int]:
        """The texts (by position) this term matches by its stemmed words (see the module)."""
        words = term_words(term)
        if not words:
            return frozenset()
        need = needed(len(words))
        counts: dict[int, int] = {}
        for word in words:
            for n in self.holding(word):
                counts[n] = counts.get(n, 0) + 1
        return frozenset(n for n, count in counts.items() if count >= need)

    def terms_of(self, terms: Iterable[str]) -> list[set[str]]:
        """For each text, the terms (as given) that match it."""
        found: list[set[str]] = [set() for _ in range(self._size)]
        for term in terms:
            for n in self.matching(term):
                found[n].add(term)
        return found

"""What a recall query may cost, and how a bad one is told to its writer.

A query reaches FTS5's MATCH as its writer wrote it, and its cost grows with
every term and most with every prefix term (`a*` reads the doclist of every
word starting with a): 1,040 prefix terms took 16 s, and the librarian
answers asks one at a time, so a save queued behind three of them waited
57 s. So a query is refused before it runs when it is longer than
MAX_QUERY_CHARS, holds more than MAX_QUERY_TERMS words or more than
MAX_PREFIX_TERMS prefix terms, or a prefix of fewer than MIN_PREFIX letters
(`*` alone is one), and one that still runs past its deadline
(`[memory] query_deadline_s`, an SQLite progress handler) is stopped. Each
is the writer's error (Refused: exit 2, a tool error, a FAILED reply), said
with what was wrong and how to write it; so is FTS5 syntax SQLite will not
parse. Only an index that cannot be read is Unavailable.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager

from agents.memory.errors import Refused

__all__ = [
    "DEADLINE_S",
    "MAX_PREFIX_TERMS",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TERMS",
    "MIN_PREFIX",
    "DeadlinePassed",
    "bounded",
    "check_query",
    "deadline_refusal",
    "syntax_refusal",
]

MAX_QUERY_CHARS = 1000
MAX_QUERY_TERMS = 32
MAX_PREFIX_TERMS = 4
# letters before a *: on 100,000 entries four one-letter prefixes cost 1 s, two-letter 0.3 s
MIN_PREFIX = 2
DEADLINE_S = 2.0
PROGRESS_STEPS = 1000  # SQLite VM instructions between two looks at the clock

HOW = (
    'Write words (all must match), OR between alternatives, "double quotes" around a '
    "phrase or anything with punctuation, and prefix* after a word's first letters; "
    'e.g. deploy OR "build host"'
)
_TERM = re.compile(r"[^\W_]+", re.UNICODE)
_LAST_WORD = re.compile(r"[^\W_]+$", re.UNICODE)
_OPERATORS = frozenset(("AND", "OR", "NOT", "NEAR"))


def check_query(query: str) -> None:
    """Refused when the query is over a bound (module docstring); nothing has run yet."""
    if len(query) > MAX_QUERY_CHARS:
        raise Refused(
            f"the query is {len(query)} characters long; a recall query holds at most "
            f"{MAX_QUERY_CHARS}: keep the few words that matter",
            query=query[:200],
        )
    terms = [t for t in _TERM.findall(query) if t not in _OPERATORS]
    if len(terms) > MAX_QUERY_TERMS:
        raise Refused(
            f"the query has {len(terms)} terms; a recall query holds at most "
            f"{MAX_QUERY_TERMS}: keep the few words that matter",
            query=query[:200],
        )
    prefixes = query.count("*")
    if prefixes > MAX_PREFIX_TERMS:
        raise Refused(
            f"the query has {prefixes} prefix terms (word*); a recall query holds at most "
            f"{MAX_PREFIX_TERMS}, since each reads every word it starts: write whole words, "
            "or longer prefixes",
            query=query[:200],
        )
    for star in re.finditer(r"\*", query):
        before = query[: star.start()].rstrip()
        before = before[:-1] if before.endswith('"') else before  # "a phrase" * is a prefix too
        start = _LAST_WORD.search(before)
        letters = start.group(0) if start else ""
        if len(letters) < MIN_PREFIX:
            raise Refused(
                f"the query {query[:200]!r} has a prefix term {letters + '*'!r}: a prefix "
                f"needs at least {MIN_PREFIX} letters before the *, like deploy*, since a "
                f"shorter one reads nearly every word in the index. {HOW}",
                query=query[:200],
            )


def syntax_refusal(query: str, detail: str) -> Refused:
    """The writer's query is not FTS5 syntax SQLite accepts: say so, and how to write it."""
    return Refused(
        f"the query {query[:200]!r} is not valid FTS5 syntax ({detail or 'SQLite said no'}). {HOW}",
        query=query[:200],
    )


class DeadlinePassed(Exception):
    """The query ran past its deadline and SQLite stopped it."""


@contextmanager
def bounded(db: sqlite3.Connection, seconds: float) -> Iterator[None]:
    """Run the statements inside under a deadline: past it, SQLite interrupts the statement
    and DeadlinePassed is raised here (the connection stays usable)."""
    deadline = time.monotonic() + seconds
    passed = False

    def check() -> int:
        nonlocal passed
        passed = time.monotonic() > deadline
        return 1 if passed else 0

    db.set_progress_handler(check, PROGRESS_STEPS)
    try:
        yield
    except sqlite3.OperationalError:
        if passed:
            raise DeadlinePassed from None
        raise
    finally:
        db.set_progress_handler(None, 0)


def deadline_refusal(query: str, seconds: float) -> Refused:
    return Refused(
        f"the query {query[:200]!r} ran longer than {seconds:g} s and was stopped; use fewer "
        "words, whole words rather than prefixes, or a narrower --ns",
        query=query[:200],
    )

"""The recall a lurker makes before every handler run: the lessons it hands over unasked.

For nick N and the message that woke it: N's own lessons
(`/bullpen/lessons-learned/N`, query = N and the message's words, k = 8) and
the top 2 general ones (`/bullpen/lessons-learned` itself, never a
sub-namespace), each ranked by BM25 within its namespace alone. Best BM25 matches first; when fewer match, the newest fill up
to k, so a nick is told its lessons whether or not the message words them.

A lurker whose index is missing or unreadable wakes without lessons and says
so in its log (once, then again only when it changes); it tries again at most
every RETRY_S seconds, so a missing index costs a wake nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents.memory.entry import Entry
from agents.memory.errors import Refused, Unavailable
from agents.memory.index import Index, words_of
from agents.memory.namespaces import GENERAL_LESSONS, index_path, lessons_ns
from room.errors import BullpenError

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["GENERAL_K", "OWN_K", "Lesson", "LessonReader", "block", "wake_lessons"]

OWN_K, GENERAL_K = 8, 2
RETRY_S = 5.0
# Words of the message, after the nick: enough to rank by; BM25's cost grows with each
# word's candidates, so fewer is cheaper (bench/memory.py).
MAX_WORDS = 12


@dataclass(frozen=True)
class Lesson:
    """One lesson as a handler receives it."""

    id: str
    ns: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "ns": self.ns, "text": self.text}


def _best(index: Index, words: list[str], ns: str, k: int) -> list[Entry]:
    found = index.lessons(ns, words, k)
    if len(found) < k:
        have = {e.seq for e in found}
        newest = index.recall(None, ns, k + len(found), exact=True)
        found += [e for e in newest if e.seq not in have][: k - len(found)]
    return found


def wake_lessons(index: Index, nick: str, text: str) -> list[Lesson]:
    """The lessons for one wake of `nick` by a message saying `text`."""
    words = words_of(f"{nick} {text}", MAX_WORDS)
    own = _best(index, words, lessons_ns(nick), OWN_K)
    general = _best(index, words, GENERAL_LESSONS, GENERAL_K)
    return [Lesson(e.id, e.ns, e.text) for e in (*own, *general)]


def block(lessons: list[Lesson]) -> str:
    """The short lessons block a prompt starts with ('' for none)."""
    if not lessons:
        return ""
    lines = [
        "Lessons from shared memory (recalled for you; follow them unless the ask says otherwise):"
    ]
    lines += [f"- [{lesson.id}] {' '.join(lesson.text.split())}" for lesson in lessons]
    return "\n".join(lines) + "\n\n"


class LessonReader:
    """One lurker's read-only view of the index, opened lazily and kept open."""

    def __init__(self, home: Home, nick: str) -> None:
        self.home = home
        self.nick = nick
        self._index: Index | None = None
        self._next_try = 0.0
        self.problem: str | None = None
        self.said: str | None = None  # the problem last logged, so the log says it once

    def _open(self) -> Index | None:
        if self._index is not None:
            return self._index
        now = time.monotonic()
        if now < self._next_try:
            return None
        self._next_try = now + RETRY_S
        try:
            self._index = Index.open(index_path(self.home), create=False)
        except BullpenError as exc:
            self.problem = exc.message
            return None
        self.problem = None
        return self._index

    def recall(self, text: str) -> tuple[list[Lesson], str | None]:
        """(lessons, None), or ([], why there are none) when the index cannot be read."""
        index = self._open()
        if index is None:
            return [], self.problem
        try:
            return wake_lessons(index, self.nick, text), None
        except (Unavailable, Refused) as exc:
            self.problem = exc.message
        except Exception as exc:  # a corrupt or replaced file: wake without lessons
            self.problem = f"the memory index could not be read ({type(exc).__name__}: {exc})"
        self._index = None
        index.close()
        return [], self.problem

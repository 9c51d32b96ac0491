"""The manual-lookup memory a fenced seat cannot look up, recalled for it by its step.

The seed's escalation recipe has an agent that guesses a build dir, a path or a
ticket rule read `/bullpen/sandbox` (and `/bullpen/ops`) first, by asking
`@librarian` or running `bullpen memory recall`. A code seat cannot follow it
from where it runs: the fence strips BULLPEN_HOME and the strict fence hides the
home, a seat's post is unverified, and an `openai` seat answers one JSON object.
So the step that asks the seat (outside the fence) recalls what the recipe would
have found, through the librarian's own recall (Index.recall: whole-segment
prefix, BM25), and the prompt shows it with ids, as the wake's lessons are shown.

Bounded: K entries a namespace, each cut to MAX_CHARS. An index that is missing or
unreadable gives none (the prompt then says nothing was recalled), never a failed step.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from agents.memory.errors import Refused, Unavailable
from agents.memory.index import Index, terms_query, words_of
from agents.memory.lessons import MAX_WORDS, Lesson
from agents.memory.namespaces import index_path
from room.errors import BullpenError

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["MANUAL_NAMESPACES", "K", "manual_block", "recall_manual"]

MANUAL_NAMESPACES = ("/bullpen/sandbox", "/bullpen/ops")
K = 4
MAX_CHARS = 600


def _recall(index: Index, query: str | None, ns: str) -> list[Lesson]:
    """The best K matches under `ns`, filled up with its newest entries: the conventions are
    few, and a seat is told them whether or not the ticket words them."""
    found = index.recall(query, ns, K) if query else []
    if len(found) < K:
        have = {entry.seq for entry in found}
        found += [e for e in index.recall(None, ns, 2 * K) if e.seq not in have][: K - len(found)]
    return [Lesson(entry.id, entry.ns, entry.text) for entry in found]


def recall_manual(home: Home, text: str) -> list[Lesson]:
    """The `/bullpen/sandbox` and `/bullpen/ops` entries for a step about `text` (the
    ticket's words); [] when the home's index cannot be read."""
    try:
        index = Index.open(index_path(home), create=False)
    except BullpenError:
        return []
    try:
        query = terms_query(" ".join(words_of(text, MAX_WORDS)))
        return [note for ns in MANUAL_NAMESPACES for note in _recall(index, query, ns)]
    except (Unavailable, Refused, sqlite3.DatabaseError):  # unreadable: a prompt without them
        return []
    finally:
        index.close()


def manual_block(notes: list[Lesson]) -> str:
    """What the prompt says in place of the escalation line: the recalled entries."""
    where = " and ".join(MANUAL_NAMESPACES)
    if not notes:
        return f"SHARED MEMORY ({where}): nothing saved there was recalled for this step."
    lines = [
        f"SHARED MEMORY ({where}), recalled for you: the standing conventions and operational "
        "facts an agent reads before guessing a build dir, a path or a ticket rule:"
    ]
    for note in notes:
        text = " ".join(note.text.split())
        if len(text) > MAX_CHARS:
            text = text[: MAX_CHARS - 1] + "…"
        lines.append(f"- [{note.id}] ({note.ns}) {text}")
    return "\n".join(lines)

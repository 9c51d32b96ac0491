"""Shared memory: a projection of the room into an SQLite FTS5 index (docs/memory.md).

This package is low in the house (it imports room, trust, agents.config and
agents.home only) so that agents.runtime can hand lessons on every wake. The
librarian's step, the backpass sync and the CLI live in agents.librarian.

The read API for a view (the web page), over the home's index, read-only:

    lessons_for(home, nick, limit=100) -> list[dict]
        the live entries of /bullpen/lessons-learned/<nick> (and below), newest
        first, each {"id", "ns", "text", "source", "saved_by", "seq"}; [] when
        the index does not exist yet.
    namespace_counts(home) -> dict[str, dict]
        every declared namespace and every one holding entries:
        {ns: {"count": live entries, "declared": bool, "meaning": str | None}}.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.memory.errors import Refused, Unavailable
from agents.memory.index import Index
from agents.memory.namespaces import index_path, lessons_ns, namespaces

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["Refused", "Unavailable", "lessons_for", "namespace_counts"]

_KEYS = ("id", "ns", "text", "source", "saved_by", "seq")


def _reader(home: Home) -> Index | None:
    try:
        return Index.open(index_path(home), create=False)
    except Unavailable:
        return None


def lessons_for(home: Home, nick: str, limit: int = 100) -> list[dict[str, Any]]:
    """`nick`'s own lessons, newest first (see the module docstring)."""
    index = _reader(home)
    if index is None:
        return []
    try:
        found = index.recall(None, lessons_ns(nick), limit)
    finally:
        index.close()
    return [{key: entry.to_dict()[key] for key in _KEYS} for entry in found]


def namespace_counts(home: Home) -> dict[str, dict[str, Any]]:
    """Declared namespaces and those holding entries, with live counts (module docstring)."""
    declared = namespaces(home).declared
    index = _reader(home)
    counts: dict[str, int] = {}
    if index is not None:
        try:
            counts = index.counts()
        finally:
            index.close()
    return {
        ns: {"count": counts.get(ns, 0), "declared": ns in declared, "meaning": declared.get(ns)}
        for ns in sorted({*declared, *counts})
    }

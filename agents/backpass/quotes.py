"""The quote check: an item stays only if its quote is really in its trace.

Both sides are whitespace-folded (every run of whitespace, newlines
included, becomes one space; ends trimmed) and then compared as plain
substrings, case and punctuation kept. Folding forgives a model that
re-wrapped a line; anything else it changed is a fabricated quote.
An empty quote is a missing quote.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["QuoteCheck", "check_items", "fold", "quote_found"]


def fold(text: str) -> str:
    """`text` with every whitespace run turned into one space and the ends trimmed."""
    return " ".join(text.split())


def quote_found(quote: str, folded_trace: str) -> bool:
    """Whether `quote`, folded, is a non-empty substring of the already folded trace."""
    needle = fold(quote)
    return bool(needle) and needle in folded_trace


@dataclass
class QuoteCheck:
    """The items of one trace that survived, and how many did not."""

    kept: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def returned(self) -> int:
        return len(self.kept) + len(self.dropped)


def check_items(items: Iterable[dict[str, Any]], trace_text: str) -> QuoteCheck:
    """Split `items` (dicts with a `quote`) into those whose quote is in `trace_text` and the rest."""
    folded = fold(trace_text)
    result = QuoteCheck()
    for item in items:
        target = result.kept if quote_found(str(item.get("quote", "")), folded) else result.dropped
        target.append(item)
    return result

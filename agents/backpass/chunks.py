"""A trace longer than the bulk model's context, analysed in overlapping chunks.

A session transcript grows past any model's context: the hand runs met a
400,000-character trace that failed every night until a person split the
file. Here the run does it: the trace's rendered text (what the quote check
reads) is cut into windows of at most `window` characters, each starting
`overlap` characters before the previous one ended, so an observation that
straddles a cut is whole in one of them. A cut falls on a line break when
one lies in the window's second half, so a line is not split if it need
not be. Each chunk is one bulk call; the items of all the chunks are merged
(one item per kind and quote, and per kind and text), and every quote is
still checked against the whole trace (step 3).

The window is `[backpass] context_chars` of trace, or, when the bulk
model's context is given in tokens (`context_tokens`), that many tokens less
the answer's own (the analysis' max_tokens, which the server keeps room for), at
CHARS_PER_TOKEN characters each, less the prompt template's own length.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agents.backpass.prompts import ANALYSIS_TOKENS
from agents.backpass.quotes import fold

__all__ = ["CHARS_PER_TOKEN", "Chunk", "estimate", "merge_items", "split", "window"]

CHARS_PER_TOKEN = 3  # conservative: English prose runs nearer 4; code and JSON nearer 3
MIN_WINDOW = 1000
TEMPLATE_ALLOWANCE = 8000  # the foreman's guess at a template's length, for its deadline


@dataclass(frozen=True)
class Chunk:
    """One window of the trace's text: characters [start, end) of it."""

    start: int
    end: int
    text: str


def window(
    context_chars: int, context_tokens: int | None, overlap: int, template_chars: int
) -> int:
    """The trace characters one bulk call is shown (never under MIN_WINDOW, nor 2 × overlap)."""
    chars = context_chars
    if context_tokens is not None:
        chars = (context_tokens - ANALYSIS_TOKENS) * CHARS_PER_TOKEN - template_chars
    return max(chars, MIN_WINDOW, 2 * overlap + 1)


def split(text: str, size: int, overlap: int) -> list[Chunk]:
    """The text as chunks of at most `size` characters overlapping by `overlap` (see module)."""
    if len(text) <= size:
        return [Chunk(0, len(text), text)]
    chunks: list[Chunk] = []
    start = 0
    while True:
        end = min(start + size, len(text))
        if end < len(text):
            newline = text.rfind("\n", start + size // 2, end)
            if newline > start:
                end = newline + 1
        chunks.append(Chunk(start, end, text[start:end]))
        if end >= len(text):
            return chunks
        start = max(end - overlap, start + 1)


def estimate(size: int, size_per_chunk: int, overlap: int) -> int:
    """How many chunks a text of `size` characters (or fewer) takes at most."""
    if size <= size_per_chunk:
        return 1
    step = max(1, size_per_chunk // 2 - overlap)  # a cut on a line break may halve a window
    return 1 + math.ceil((size - size_per_chunk) / step)


def merge_items(answers: Iterable[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The chunks' items in order, an item dropped when one of its kind already has its
    quote or its text (whitespace-folded, case kept): the overlap reports some twice."""
    seen: set[tuple[str, str, str]] = set()
    merged: list[dict[str, Any]] = []
    for items in answers:
        for item in items:
            kind = str(item.get("kind", ""))
            keys = {(kind, "text", fold(str(item.get("text", ""))))}
            if fold(str(item.get("quote", ""))):
                keys.add((kind, "quote", fold(str(item["quote"]))))
            if keys & seen:
                continue
            seen |= keys
            merged.append(item)
    return merged

"""How counts read in what people see (reports, funnels, step replies): `1 deep cut`, `2 deep cuts`;
and the "did you mean" a typo is answered with."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["counted", "did_you_mean"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun, agreeing: `1 batch`, `3 batches` (pass `plural` when not +s)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def did_you_mean(word: str, known: Iterable[str], prefix: str = "") -> str:
    """` (did you mean @ann, @anna?)` for the known words nearest `word` ('' for none): one
    wording for a mistyped nick or thread wherever a command meets one."""
    near = difflib.get_close_matches(word, sorted(set(known)), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(prefix + n for n in near)}?)" if near else ""

"""How counts read in what people see (reports, funnels, step replies): `1 deep cut`, `2 deep cuts`."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun, agreeing: `1 batch`, `3 batches` (pass `plural` when not +s)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"

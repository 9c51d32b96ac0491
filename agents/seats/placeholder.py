"""What a prompt shows where an answer goes, and the check that refuses it handed back.

A small model copies what a prompt shows it: a schema's `"string (10 to 12
items)"`, an example's `"at most 12 words"`, the input's own key names. So a
prompt shows the shape of an answer with placeholders in angle brackets
(`"<reason>"`), and a step's validator refuses an answer that hands one
back, or hands back one of the words that describe the answer rather than
answer it. The judge then retries with that error, as with any invalid
answer: a copied example never passes as a finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["PLAIN_TEXT", "copied", "placeholder", "plain_text"]

_BRACKETED = re.compile(r"<[^<>]{1,80}>")
# Words a schema or an instruction uses for the answer's parts, never an answer themselves.
# ("none" or "n/a" can be an answer: a synthesis with nothing to say, say.)
_SCHEMA_WORDS = frozenset(
    {
        "",
        "...",
        "…",
        "string",
        "str",
        "text",
        "integer",
        "boolean",
        "id",
        "row_n",
        "one line",
        "at most 12 words",
        "reason",
        "term",
        "terms",
    }
)


# What a schema-constraining server may write in a short free-text field: plain words and
# punctuation, never an angle bracket (so never a placeholder handed back), an underscore
# (an input's key name) or a character JSON must escape. ASCII only: a grammar built from a
# pattern is exact, and a wider class would let a weak model wander into escapes.
PLAIN_TEXT = "A-Za-z0-9 ,.;:'()!?/&-"


def plain_text(longest: int) -> dict[str, object]:
    """A JSON schema for a short free-text field of plain words, at most `longest` characters
    (the pattern bounds the length for llama.cpp, which drops maxLength beside a pattern;
    maxLength says the same to every other reader)."""
    return {
        "type": "string",
        "pattern": f"^[A-Za-z0-9][{PLAIN_TEXT}]{{0,{longest - 1}}}$",
        "maxLength": longest,
    }


def placeholder(name: str) -> str:
    """How a prompt shows the place of an answer's part: `<name>`."""
    return f"<{name}>"


def copied(value: str, also: Iterable[str] = ()) -> bool:
    """Whether `value` hands back a placeholder, a schema word or one of `also` (the input's
    key names, say) instead of an answer of its own."""
    folded = " ".join(value.split()).casefold()
    if _BRACKETED.fullmatch(folded) or folded in _SCHEMA_WORDS:
        return True
    return folded in {" ".join(word.split()).casefold() for word in also}

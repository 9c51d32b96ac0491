"""A model's answer, from raw text to a validated object — or a reason it was rejected.

The answer must be JSON and nothing else. The one forgiveness is a Markdown
fence (```json … ```), optionally after a single short preamble line such as
"Here is the JSON:", because models add one even when told not to. Parsing
is the room's strict JSON (no NaN, no duplicate keys): the answer ends up in
a room post's data, and what the room would refuse is refused here first.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from room.strictjson import JsonRejected, loads

__all__ = ["AnswerRejected", "parse_answer", "strip_fence", "validate_answer"]

AnswerT = TypeVar("AnswerT", bound=BaseModel)

FENCE = "```"
MAX_PREAMBLE = 200  # characters; a longer lead-in is prose, not an accident
_TAG = re.compile(r"[A-Za-z0-9_+.-]*")


class AnswerRejected(ValueError):
    """The answer is not JSON matching the schema; the message says why, for the model too."""


def strip_fence(text: str) -> str:
    """The text inside one Markdown fence around the whole answer, else the text stripped.

    Accepted: optional whitespace, at most one short preamble line, an opening
    fence with an optional language tag, the body, a closing fence, optional
    whitespace. Anything else (two fences, prose after the fence) is returned
    unchanged so that parsing fails and says so.
    """
    stripped = text.strip().removeprefix("\ufeff").strip()
    start = stripped.find(FENCE)
    if start < 0 or not stripped.endswith(FENCE) or start == len(stripped) - len(FENCE):
        return stripped
    preamble = stripped[:start].strip()
    if "\n" in preamble or len(preamble) > MAX_PREAMBLE:
        return stripped
    inner = stripped[start + len(FENCE) : -len(FENCE)]
    first, newline, rest = inner.partition("\n")
    body = rest if newline and _TAG.fullmatch(first.strip()) else inner
    if FENCE in body:
        return stripped
    return body.strip()


def _began(text: str, limit: int = 60) -> str:
    head = " ".join(text.split())
    return repr(head if len(head) <= limit else head[:limit] + "…")


def parse_answer(text: str) -> Any:
    """The JSON value of an answer, fence forgiven, or AnswerRejected."""
    if not text.strip():
        raise AnswerRejected("the answer is empty; it must be a JSON object")
    try:
        return loads(text.strip())
    except JsonRejected as exc:
        first_error = exc
    unfenced = strip_fence(text)
    if unfenced != text.strip():
        try:
            return loads(unfenced)
        except JsonRejected as exc:
            first_error = exc
    raise AnswerRejected(
        f"the answer is not valid JSON ({first_error}); it began {_began(text)}"
    ) from None


def describe(exc: ValidationError, limit: int = 5) -> str:
    """A pydantic error in one line: 'terms: List should have at least 10 items; …'."""
    parts = []
    for error in exc.errors()[:limit]:
        where = ".".join(str(part) for part in error["loc"]) or "the answer"
        parts.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
    more = exc.error_count() - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def validate_answer(text: str, schema: type[AnswerT]) -> AnswerT:
    """The answer as an instance of `schema`, or AnswerRejected saying what did not match.
    A schema with a `from_text` classmethod reads a text answer itself (a code block)."""
    reader = getattr(schema, "from_text", None)
    value = reader(text) if callable(reader) else parse_answer(text)
    try:
        return schema.model_validate(value)
    except ValidationError as exc:
        raise AnswerRejected(
            f"the {'answer' if callable(reader) else 'JSON'} does not match the "
            f"{schema.__name__} schema: {describe(exc)}"
        ) from None

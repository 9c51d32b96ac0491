"""Whole-number query parameters, read one way for every hub endpoint (/read, /tlog/...)."""

from __future__ import annotations

import re

from starlette.requests import Request

from room.errors import BadRequest

_DIGITS = re.compile(r"[0-9]+")  # ASCII only: int() would also take "+5", " 5", "٥"


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    """`name` from the query as a whole number in [low, high]; `default` when absent."""
    text = request.query_params.get(name)
    if text is None:
        return default
    if not _DIGITS.fullmatch(text):
        raise BadRequest(f"{name} must be a whole number, got {text[:40]!r}")
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(high)) or not low <= int(digits) <= high:
        raise BadRequest(f"{name} must be between {low} and {high}, got {text[:40]}")
    return int(digits)

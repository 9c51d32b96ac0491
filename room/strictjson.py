"""JSON in and out, exactly.

The room's audit chain hashes exact bytes, so what goes in must be plain,
unambiguous JSON: no NaN or Infinity (not even as `1e400`, which overflows to
infinity), no duplicate keys (two parsers could pick different values), no
lone surrogates (they cannot be encoded as UTF-8), no integer longer than
Python will convert, and no nesting so deep it exhausts a parser's stack.
Lines are written compact, UTF-8, one per `\\n`.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 32


class JsonRejected(ValueError):
    """The text is not strict JSON; the message says why."""


def _no_constants(name: str) -> Any:
    raise JsonRejected(f"{name} is not valid JSON; send numbers as finite values")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRejected(f"the number {text[:40]} is too large to be a finite value")
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise JsonRejected(f"duplicate key {key!r}; each key may appear once per object")
        obj[key] = value
    return obj


def _check(value: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise JsonRejected(f"nesting deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise JsonRejected("a string holds a lone surrogate (\\ud800-\\udfff)") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check(key, depth + 1)
            _check(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check(item, depth + 1)


def loads(raw: bytes | str) -> Any:
    """Parse strict JSON or raise JsonRejected with a reason a person can act on."""
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonRejected(f"not UTF-8 at byte {exc.start}") from None
        # Text decoded from UTF-8 holds a lone surrogate only through a \u escape, and
        # nests no deeper than its brackets: without either, the walk below finds nothing.
        walk = "\\u" in text or text.count("{") + text.count("[") > MAX_DEPTH
    else:
        text, walk = raw, True
    try:
        value = json.loads(
            text,
            parse_constant=_no_constants,
            parse_float=_finite,
            object_pairs_hook=_no_duplicates,
        )
    except JsonRejected:
        raise
    except RecursionError:
        raise JsonRejected(f"nesting deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise JsonRejected(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError:  # int() refuses more than sys.get_int_max_str_digits() digits
        raise JsonRejected("a number has too many digits; send it as a string") from None
    if walk:
        _check(value, 0)
    return value


def dumps(value: Any) -> str:
    """Compact JSON text as stored in the room: UTF-8, no NaN, key order kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def canonical(value: Any) -> bytes:
    """The one byte form signatures cover: sorted keys, compact, UTF-8."""
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
    ).encode("utf-8")

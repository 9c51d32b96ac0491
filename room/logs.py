"""Logging for every bullpen process: structlog, JSON lines when not on a terminal.

Secrets are never logged on purpose; as a second line of defence every
secret a process loads is registered here and scrubbed from every event
before it is rendered.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

_SECRETS: set[str] = set()
REDACTED = "<redacted>"


def register_secret(value: bytes | str) -> None:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    text = text.strip()
    if len(text) >= 8:
        _SECRETS.add(text)


def registered() -> frozenset[str]:
    """Every secret this process registered (trust/screen.py screens them too)."""
    return frozenset(_SECRETS)


def scrub(value: Any) -> Any:
    """`value` with every registered secret replaced, in strings at any depth."""
    if isinstance(value, str):
        for secret in _SECRETS:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


def _redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    if not _SECRETS:
        return event
    return {key: scrub(value) for key, value in event.items()}


class _Stderr:
    """sys.stderr as it is when a line is written, not as it was when logging was set up:
    whoever replaces sys.stderr later (a test runner capturing it, a redirect) still gets
    the lines, and a stream closed since then is never written to."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(json: bool | None = None, level: str = "info") -> None:
    """Set up structlog for this process; call once, early, from the CLI."""
    use_json = (not sys.stderr.isatty()) if json is None else json
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _redact,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(level=logging.WARNING, stream=_Stderr(), format="%(name)s: %(message)s")

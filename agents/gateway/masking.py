"""A backend's key never comes back through the gateway, however the backend quotes it.

A backend is sent its key (`api_key_env`) and may echo it: in a 4xx body
("invalid key sk-..."), in a 200 answer, in a stream. Everything the
gateway passes on from a backend goes through here first. A whole JSON
answer is masked after parsing, so a key spelt with JSON escapes
(`\\u0073k-...`) is found as well as a plain one; a stream is masked piece
by piece, holding back only a tail that could still grow into a key, so a
key split over two chunks is caught and ordinary text is not delayed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = ["MASK", "StreamMask", "mask_body", "mask_json", "mask_text"]

MASK = "***"


def mask_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret replaced by ***."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, MASK)
    return text


def mask_json(value: Any, secrets: tuple[str, ...]) -> Any:
    """`value` with every secret masked in every string, keys too, at any depth."""
    if not secrets:
        return value
    if isinstance(value, str):
        return mask_text(value, secrets)
    if isinstance(value, list):
        return [mask_json(item, secrets) for item in value]
    if isinstance(value, dict):
        return {mask_text(str(k), secrets): mask_json(v, secrets) for k, v in value.items()}
    return value


def mask_body(raw: bytes, secrets: tuple[str, ...]) -> bytes:
    """A backend's body (an error, say) to pass on: JSON masked as JSON, anything else as text."""
    if not secrets:
        return raw
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        return mask_text(raw.decode("utf-8", "replace"), secrets).encode()
    return json.dumps(mask_json(parsed, secrets), ensure_ascii=False).encode()


class StreamMask:
    """Masks a text that arrives in pieces (one streamed choice's content)."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.secrets = tuple(s for s in secrets if s)
        self._held = ""

    def feed(self, text: str) -> str:
        """What of `text` (after what was held back) is safe to pass on now, masked."""
        if not self.secrets:
            return text
        buffer = mask_text(self._held + text, self.secrets)
        hold = self._held_back(buffer)
        self._held = buffer[len(buffer) - hold :] if hold else ""
        return buffer[: len(buffer) - hold]

    def _held_back(self, buffer: str) -> int:
        """The length of the longest tail of `buffer` that begins a secret."""
        best = 0
        for secret in self.secrets:
            at = buffer.find(secret[0], max(0, len(buffer) - len(secret) + 1))
            while at != -1 and len(buffer) - at > best:
                if secret.startswith(buffer[at:]):
                    best = len(buffer) - at
                    break
                at = buffer.find(secret[0], at + 1)
        return best

    def finish(self) -> str:
        """The tail held back, once the text has ended (it was not a key)."""
        rest, self._held = self._held, ""
        return rest

"""Message ids: unique and sortable (ULIDs), plus the room's timestamps."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, rem = divmod(value, 32)
        chars.append(_ALPHABET[rem])
    return "".join(reversed(chars))


class IdClock:
    """Monotonic ULIDs: within one millisecond the random part counts up.

    One writer owns one clock, so ids sort in the order lines were stamped
    even when the wall clock steps back.
    """

    def __init__(self) -> None:
        self._last_ms = 0
        self._last_rand = 0

    def next(self, now_ms: int | None = None) -> tuple[str, int]:
        """Return (ulid, the millisecond timestamp it encodes)."""
        ms = int(time.time() * 1000) if now_ms is None else now_ms
        if ms <= self._last_ms:
            ms = self._last_ms
            rand = self._last_rand + 1
        else:
            rand = int.from_bytes(os.urandom(10), "big") >> 1  # leave room to count up
        self._last_ms, self._last_rand = ms, rand
        return _encode(ms, 10) + _encode(rand, 16), ms


def rfc3339_ms(ms: int) -> str:
    """UTC RFC 3339 with milliseconds: 2026-12-01T03:07:19.123Z."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"

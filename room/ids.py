"""Message ids: unique and sortable (ULIDs), plus the room's timestamps.

Both are made once per stored line on the hub's post path, so each is a few
C calls rather than a loop in Python (docs/performance.md, the post path).
"""

from __future__ import annotations

import base64
import os
import time
from datetime import UTC, datetime

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# base64's RFC 4648 base32 digits, read as Crockford's (the ULID alphabet): same values.
_CROCKFORD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", _ALPHABET.encode())


def _encode(value: int, length: int) -> str:
    """`value` as `length` Crockford base32 digits, most significant first (length <= 32)."""
    digits = base64.b32encode(value.to_bytes(20, "big")).translate(_CROCKFORD)
    return digits[32 - length :].decode("ascii")


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
        return _encode((ms << 80) | rand, 26), ms


_second: tuple[int, str] = (-1, "")  # the last whole second formatted, and its text


def rfc3339_ms(ms: int) -> str:
    """UTC RFC 3339 with milliseconds: 2026-12-01T03:07:19.123Z."""
    global _second
    seconds, millis = divmod(ms, 1000)
    if _second[0] != seconds:  # a new second: format it once for every line within it
        moment = datetime.fromtimestamp(seconds, tz=UTC)
        _second = (seconds, moment.strftime("%Y-%m-%dT%H:%M:%S."))
    return f"{_second[1]}{millis:03d}Z"

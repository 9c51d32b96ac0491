"""A secret in the forms a copy of it takes, and finding any piece of them in text.

The screen (trust/screen.py) matched exact bytes only: an upper-cased hex
secret, one split in two halves with a space, a dash, a newline or `" + "`
between, or its base64 went through to the room, a prompt and git (issue 23).
A copy is found here whatever its

- case and separators: text and spellings are compared folded to lower case
  with everything but letters and digits removed (JSON's `\\n`, `\\"`, `\\uXXXX`
  escapes too), so `AB12-cd34`, `ab12 CD34` and `"ab12" + "cd34"` are one;
- pieces: any PIECE (16) characters in a row of a spelling, so each half of
  a 32-byte key or a 64-character token is found alone, and so is any split of
  it into pieces of which one is that long;
- encoding: besides its own text, a secret is spelled as the hex of its
  bytes and as base64 (standard or URL-safe, which fold alike) in each of the
  three alignments a piece of it can start at; a token that is itself hex or
  base64 is spelled from the bytes it encodes as well. A private key's raw
  32 bytes are spelled the same way, which covers the key part of its PEM body.

Only high-entropy values are cut into pieces: tokens (letters, digits and
`+/=_-` only) and raw keys. A PEM body (whose first bytes are the same for every
key of a kind, and shared with public keys) and a value with spaces in it (a
passphrase, whose pieces are ordinary words) match only whole.

Finding is one C pass to fold the text, its 8-byte words as integers, and one
set look-up each (`isdisjoint`); only a word that is a gram of some spelling
is looked at in Python. Any PIECE-long run holds a whole 8-aligned word, so no
piece is missed.
"""

from __future__ import annotations

import base64
import binascii
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["PIECE", "RAW", "TOKEN", "WHOLE", "PieceIndex", "Secret", "fold"]

PIECE = 16  # characters of a spelling, folded, that are a piece of a secret
GRAM = 8  # bytes of one word; PIECE >= 2 * GRAM - 1, so a piece holds a whole aligned word
TOKEN, RAW, WHOLE = "token", "raw", "whole"

_ALNUM = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_DELETE = bytes(i for i in range(256) if i not in _ALNUM)
_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_ESCAPE = re.compile(rb'\\(?:u[0-9A-Fa-f]{4}|[nrtbf"\\/])')
_HEX = re.compile(rb"(?:[0-9A-Fa-f]{2})+")
_B64 = re.compile(rb"[A-Za-z0-9+/_-]+=*")


def fold(data: bytes) -> bytes:
    """`data` as the screen compares it: JSON escapes and everything but letters and
    digits removed, letters lower-cased."""
    if b"\\" in data:
        data = _ESCAPE.sub(b" ", data)
    return data.translate(_LOWER, _DELETE)


@dataclass(frozen=True)
class Secret:
    """One value to screen for; `kind` says which forms of it count (module docstring)."""

    value: bytes
    what: str  # what a hit names, e.g. "the shared secret"
    kind: str = TOKEN  # TOKEN: text cut into pieces; RAW: bytes cut into pieces; WHOLE


@dataclass(frozen=True)
class _Spelling:
    text: bytes  # folded
    least: int  # the shortest run of it that counts
    what: str


def _aligned_base64(raw: bytes) -> list[bytes]:
    """base64 of `raw` as it reads when a copy starts 0, 1 or 2 bytes into a 3-byte group:
    only the characters that depend on `raw`'s bits alone."""
    out = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw)
        start = -(-8 * shift // 6)
        end = 8 * (shift + len(raw)) // 6
        out.append(encoded[start:end])
    return out


def _decoded(value: bytes) -> bytes | None:
    """The bytes a hex or base64 token encodes (None when it is neither, or too short)."""
    try:
        if _HEX.fullmatch(value):
            raw = bytes.fromhex(value.decode())
        elif _B64.fullmatch(value):
            body = value.rstrip(b"=").replace(b"-", b"+").replace(b"_", b"/")
            raw = base64.b64decode(body + b"=" * (-len(body) % 4), validate=True)
        else:
            return None
    except (ValueError, binascii.Error):
        return None
    return raw if len(raw) >= PIECE // 2 else None


def _spellings(secret: Secret) -> list[_Spelling]:
    value, what = secret.value, secret.what
    if secret.kind == WHOLE:
        text = fold(value)
        return [_Spelling(text, len(text), what)]
    forms: list[bytes] = []
    sources = [value]
    if secret.kind == TOKEN:
        forms.append(value)
        decoded = _decoded(value)
        if decoded is not None:
            sources.append(decoded)
    for raw in sources:
        forms.append(raw.hex().encode())
        forms += _aligned_base64(raw)
    return [_Spelling(fold(form), PIECE, what) for form in forms]


class PieceIndex:
    """Every 8-byte gram of every spelling of a secret set, for `find`."""

    def __init__(self, secrets: Iterable[Secret]) -> None:
        self._spellings: list[_Spelling] = []
        self._grams: dict[int, list[tuple[int, int]]] = {}
        seen: set[tuple[bytes, int]] = set()
        for secret in secrets:
            for spelling in _spellings(secret):
                key = (spelling.text, spelling.least)
                if len(spelling.text) < max(spelling.least, PIECE) or key in seen:
                    continue  # too short to find by piece (the screen matches it exactly)
                seen.add(key)
                index = len(self._spellings)
                self._spellings.append(spelling)
                text = spelling.text
                for offset in range(len(text) - GRAM + 1):
                    gram = int.from_bytes(text[offset : offset + GRAM], sys.byteorder)
                    self._grams.setdefault(gram, []).append((index, offset))
        self._keys = frozenset(self._grams)

    def __len__(self) -> int:
        return len(self._spellings)

    def find(self, data: bytes) -> str | None:
        """What the first secret found in `data`, in any of its forms, is; else None."""
        if not self._keys:
            return None
        text = fold(data)
        size = len(text) - len(text) % GRAM
        if size < GRAM:
            return None
        words = memoryview(text)[:size].cast("Q").tolist()
        if self._keys.isdisjoint(words):
            return None
        for number, word in enumerate(words):
            for index, offset in self._grams.get(word, ()):
                spelling = self._spellings[index]
                if _run(text, number * GRAM, spelling.text, offset) >= spelling.least:
                    return spelling.what
        return None


def _run(text: bytes, at: int, spelling: bytes, offset: int) -> int:
    """How long the run is where `text[at:]` and `spelling[offset:]` agree on a gram,
    extended both ways."""
    left = 0
    while left < at and left < offset and text[at - left - 1] == spelling[offset - left - 1]:
        left += 1
    right = GRAM
    while (
        at + right < len(text)
        and offset + right < len(spelling)
        and text[at + right] == spelling[offset + right]
    ):
        right += 1
    return left + right

"""A secret in the forms a copy of it takes, and finding any piece of them in text.

The screen (trust/screen.py) matched exact bytes only: an upper-cased hex
secret, one split in two halves with a space, a dash, a newline or `" + "`
between, or its base64 went through to the room, a prompt and git (issue 23).
A copy is found here whatever its

- case: text and spellings are compared folded to lower case (and URL-safe
  base64's `-_` read as `+/`, `=` padding dropped);
- pieces: any PIECE (16) characters in a row of a spelling, so each half of
  a 32-byte key or a 64-character token is found alone, whatever stands
  between the halves (a space, a newline, `" + "`, a paragraph);
- separators: a hex spelling is also looked for with everything but letters
  and digits taken out of the text (JSON's `\\n`, `\\"` and `\\uXXXX` escapes
  too), so `AB12 cd34 ...`, `ab:12:cd:34` or one group of four per line match;
- encoding: besides its own text, a secret is spelled as the hex of its
  bytes and as base64 in each of the three alignments a piece of it can start
  at; a token that is itself hex or base64 is spelled from the bytes it
  encodes as well. A private key's raw bytes are spelled the same way, which
  covers the key part of its PEM body;
- direction: every spelling is also looked for written backwards (issue 33):
  reversing is free to a reader and cost the screen only grams, not time.

Only high-entropy values are cut into pieces: tokens (letters, digits and
`+/=_-` only) and raw keys. A PEM body (whose first bytes are the same for every
key of a kind, and shared with public keys) matches only whole.

Finding is cheap for ordinary text: a piece can only be inside a run of 16 or
more token characters (hex characters, separators taken out), which one
`translate` and one substring search rule out for most prose. The runs found
are folded, joined (each ended by 1 to 8 dots, to a whole number of words) and
read as 8-byte words, each looked up in the set of every spelling's 8-byte
grams; any 16-character piece holds a whole aligned word, so none is missed.
Only a word that is a gram is looked at further, in Python. The cost is one set
look-up per 8 bytes of long token runs (a big base64 blob), about four times
the old exact match there (bench/screen.py).
"""

from __future__ import annotations

import base64
import binascii
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["PIECE", "RAW", "TOKEN", "WHOLE", "PieceIndex", "Secret", "fold"]

PIECE = 16  # characters of a spelling, folded, that are a piece of a secret
GRAM = 8  # bytes of one word; PIECE >= 2 * GRAM - 1, so a piece holds a whole aligned word
TOKEN, RAW, WHOLE = "token", "raw", "whole"

_TOKEN_CHARS = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/=_-"
_ALNUM = _TOKEN_CHARS[:62]
_HEX_CHARS = b"0123456789abcdefABCDEF"
_NOT_ALNUM = bytes(i for i in range(256) if i not in _ALNUM)
_TOKEN_MAP = bytes(0x78 if i in _TOKEN_CHARS else 0x20 for i in range(256))
_HEX_MAP = bytes(0x78 if i in _HEX_CHARS else 0x20 for i in range(256))
_FOLD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ-_", b"abcdefghijklmnopqrstuvwxyz+/")
_LONG = b"x" * PIECE
_ESCAPE = re.compile(rb'\\(?:u[0-9A-Fa-f]{4}|[nrtbf"\\/])')
_HEX = re.compile(rb"(?:[0-9A-Fa-f]{2})+")
_B64 = re.compile(rb"[A-Za-z0-9+/_-]+=*")
_HEX_SPELLING = re.compile(rb"[0-9a-f]+")


def fold(data: bytes) -> bytes:
    """A token as the screen compares it: lower case, `-_` as `+/`, no `=` padding."""
    return data.translate(_FOLD, b"=")


def unescaped(data: bytes) -> bytes:
    """`data` with JSON's escapes (`\\n`, `\\"`, `\\u0041`...) as spaces: a separator."""
    return _ESCAPE.sub(b" ", data) if b"\\" in data else data


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
        return [_Spelling(text, len(text), what), _Spelling(text[::-1], len(text), what)]
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
    forms += [form[::-1] for form in forms]  # each one written backwards too
    return [_Spelling(fold(form), PIECE, what) for form in forms]


class _Grams:
    """Every 8-byte gram of some spellings, and finding a run of one in joined text."""

    def __init__(self) -> None:
        self.spellings: list[_Spelling] = []
        self.grams: dict[int, list[tuple[int, int]]] = {}
        self.keys: frozenset[int] = frozenset()

    def add(self, spelling: _Spelling) -> None:
        index = len(self.spellings)
        self.spellings.append(spelling)
        text = spelling.text
        for offset in range(len(text) - GRAM + 1):
            gram = int.from_bytes(text[offset : offset + GRAM], sys.byteorder)
            self.grams.setdefault(gram, []).append((index, offset))

    def seal(self) -> None:
        """Done adding: the set `find` looks every word up in."""
        self.keys = frozenset(self.grams)

    def find(self, joined: bytes) -> str | None:
        """`joined` is runs of text, each followed by dots up to a whole number of words."""
        words = memoryview(joined).cast("Q").tolist()
        if self.keys.isdisjoint(words):
            return None
        for number, word in enumerate(words):
            for index, offset in self.grams.get(word, ()):
                spelling = self.spellings[index]
                if _run(joined, number * GRAM, spelling.text, offset) >= spelling.least:
                    return spelling.what
        return None


class PieceIndex:
    """The spellings of a secret set, for `find`: all of them as tokens, the hex ones
    again with separators taken out of the text."""

    def __init__(self, secrets: Iterable[Secret]) -> None:
        self._tokens = _Grams()
        self._hex = _Grams()
        seen: set[tuple[bytes, int]] = set()
        for secret in secrets:
            for spelling in _spellings(secret):
                key = (spelling.text, spelling.least)
                if len(spelling.text) < max(spelling.least, PIECE) or key in seen:
                    continue  # too short to find by piece (the screen matches it exactly)
                seen.add(key)
                self._tokens.add(spelling)
                if _HEX_SPELLING.fullmatch(spelling.text):
                    self._hex.add(spelling)
        self._tokens.seal()
        self._hex.seal()

    def __len__(self) -> int:
        return len(self._tokens.spellings)

    def find(self, data: bytes) -> str | None:
        """What the first secret found in `data`, in any of its forms, is; else None."""
        if not self._tokens.keys:
            return None
        spans = _spans(data.translate(_TOKEN_MAP))
        if spans:
            found = self._tokens.find(_joined(data, spans, fold))
            if found is not None:
                return found
        if not self._hex.keys:
            return None
        data = unescaped(data)
        spans = _spans(data.translate(_HEX_MAP, _NOT_ALNUM))
        if not spans:
            return None
        return self._hex.find(_joined(data.translate(_FOLD, _NOT_ALNUM), spans, bytes))


def _spans(mapped: bytes) -> list[tuple[int, int]]:
    """Where `mapped` has runs of PIECE or more x's: (start, end) of each."""
    spans = []
    start = mapped.find(_LONG)
    while start >= 0:  # the first match in a run is its start: the byte before is a space
        end = mapped.find(b" ", start + PIECE)
        end = len(mapped) if end < 0 else end
        spans.append((start, end))
        start = mapped.find(_LONG, end)
    return spans


def _joined(text: bytes, spans: list[tuple[int, int]], folded: Callable[[bytes], bytes]) -> bytes:
    """The runs, folded, each followed by 1 to 8 dots (never in a spelling, so no match runs
    from one run into the next) to whole words."""
    parts = []
    for start, end in spans:
        run = folded(text[start:end])
        parts.append(run + b"." * (GRAM - len(run) % GRAM))
    return b"".join(parts)


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

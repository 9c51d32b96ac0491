"""The audit chain: each line carries the SHA-256 of the line before it.

The hash covers the previous line's exact bytes without its `\\n`. The first
line's `prev` is GENESIS. Lines are split on `\\n` only: `str.splitlines`
would also split inside JSON strings at U+2028, U+0085 and friends.
"""

from __future__ import annotations

import hashlib

GENESIS = "0" * 64


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def split_lines(blob: bytes) -> tuple[list[bytes], bytes]:
    """Whole lines and the unterminated remainder (empty when blob ends in \\n)."""
    parts = blob.split(b"\n")
    return parts[:-1], parts[-1]

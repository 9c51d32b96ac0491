"""RFC 9162 §2.1 written out as its recursive definitions, over a plain list of lines.

Independent of trust/merkle.py and room/tree.py on purpose: the tests check
the hub's proofs against what the RFC's own words compute, slowly.
"""

from __future__ import annotations

import hashlib


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _k(n: int) -> int:
    """The largest power of two smaller than n."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(lines: list[bytes]) -> bytes:
    """MTH(D[n]) of §2.1.1."""
    n = len(lines)
    if n == 0:
        return _h(b"")
    if n == 1:
        return _h(b"\x00" + lines[0])
    k = _k(n)
    return _h(b"\x01" + mth(lines[:k]) + mth(lines[k:]))


def path(m: int, lines: list[bytes]) -> list[bytes]:
    """PATH(m, D[n]) of §2.1.3.1."""
    n = len(lines)
    if n == 1:
        return []
    k = _k(n)
    if m < k:
        return [*path(m, lines[:k]), mth(lines[k:])]
    return [*path(m - k, lines[k:]), mth(lines[:k])]


def subproof(m: int, lines: list[bytes], b: bool) -> list[bytes]:
    """SUBPROOF(m, D[n], b) of §2.1.4.1."""
    n = len(lines)
    if m == n:
        return [] if b else [mth(lines)]
    k = _k(n)
    if m <= k:
        return [*subproof(m, lines[:k], b), mth(lines[k:])]
    return [*subproof(m - k, lines[k:], False), mth(lines[:k])]


def proof(m: int, lines: list[bytes]) -> list[bytes]:
    """PROOF(m, D[n]) = SUBPROOF(m, D[n], true)."""
    return subproof(m, lines, True)

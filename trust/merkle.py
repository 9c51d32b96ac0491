"""The room's Merkle tree, as RFC 9162 §2.1 (RFC 6962) defines it: hashes, proofs, checks.

Pure functions, no I/O: the hub's store (room/tlog.py) hands in a way to get
the hash of any range of leaves, and gets back the proof RFC 9162 specifies;
a verifier needs only the functions at the bottom and the signed root.

    leaf hash   SHA-256(0x00 ‖ the line's exact bytes, without its newline)
    node hash   SHA-256(0x01 ‖ left ‖ right)
    leaf index  seq − 1

Why a tree next to the chain: the chain proves a line only to someone who
holds every line before it; a tree proves one line (inclusion, §2.1.3), or
that a later room extends an earlier one (consistency, §2.1.4), with
O(log n) hashes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

EMPTY_ROOT = hashlib.sha256(b"").digest()  # MTH({}), the root of an empty room

RangeHash = Callable[[int, int], bytes]  # MTH of the leaves [lo, hi)


class ProofError(ValueError):
    """A proof was asked for sizes the tree cannot answer (what to ask instead is said)."""


def leaf_hash(line: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + line).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def split_point(n: int) -> int:
    """k, the largest power of two smaller than n (n > 1): where MTH splits a range."""
    return 1 << ((n - 1).bit_length() - 1)


class Folding:
    """MTH of the first `limit` leaves, folded as lines stream past in O(log n) memory."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.count = 0
        self._stack: list[tuple[int, bytes]] = []  # (height, hash) of complete subtrees

    def add_leaf(self, value: bytes) -> None:
        if self.limit is not None and self.count >= self.limit:
            return
        self.count += 1
        height = 0
        while self._stack and self._stack[-1][0] == height:
            value = node_hash(self._stack.pop()[1], value)
            height += 1
        self._stack.append((height, value))

    def add(self, line: bytes) -> None:
        self.add_leaf(leaf_hash(line))

    def root(self) -> bytes:
        if not self._stack:
            return EMPTY_ROOT
        parts = [value for _, value in self._stack]
        value = parts.pop()
        while parts:
            value = node_hash(parts.pop(), value)
        return value


def root_of(leaves: Sequence[bytes]) -> bytes:
    """MTH of a list of leaf hashes."""
    folding = Folding()
    for leaf in leaves:
        folding.add_leaf(leaf)
    return folding.root()


def inclusion_proof(index: int, size: int, mth: RangeHash) -> list[bytes]:
    """PATH(index, D[size]) of RFC 9162 §2.1.3.1, leaf side first."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size} leaves")
    path: list[bytes] = []
    lo, n, m = 0, size, index
    while n > 1:
        k = split_point(n)
        if m < k:
            path.append(mth(lo + k, lo + n))
            n = k
        else:
            path.append(mth(lo, lo + k))
            lo, n, m = lo + k, n - k, m - k
    path.reverse()
    return path


def consistency_proof(old: int, new: int, mth: RangeHash) -> list[bytes]:
    """PROOF(old, D[new]) of RFC 9162 §2.1.4.1 (SUBPROOF with its `b` flag); empty for
    old = 0 or old = new, which need no proof."""
    if not 0 <= old <= new:
        raise ProofError(f"a tree of {old} leaves cannot be an earlier state of one of {new}")
    if old == 0 or old == new:
        return []
    path: list[bytes] = []
    lo, n, m, whole = 0, new, old, True
    while m != n:
        k = split_point(n)
        if m <= k:
            path.append(mth(lo + k, lo + n))
            n = k
        else:
            path.append(mth(lo, lo + k))
            lo, n, m, whole = lo + k, n - k, m - k, False
    if not whole:
        path.append(mth(lo, lo + n))
    path.reverse()
    return path


def root_from_inclusion(index: int, size: int, leaf: bytes, path: Sequence[bytes]) -> bytes:
    """The root a proof leads to (RFC 9162 §2.1.3.2); ProofError when it cannot lead anywhere."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size} leaves")
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise ProofError("the inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("the inclusion proof is shorter than the tree is deep")
    return r


def verify_inclusion(
    index: int, size: int, leaf: bytes, path: Sequence[bytes], root: bytes
) -> bool:
    try:
        return root_from_inclusion(index, size, leaf, path) == root
    except ProofError:
        return False


def verify_consistency(
    old: int, new: int, old_root: bytes, new_root: bytes, path: Sequence[bytes]
) -> bool:
    """RFC 9162 §2.1.4.2: does the tree of `new` leaves extend the one of `old`?"""
    if not 0 <= old <= new:
        return False
    if old == new:
        return not path and old_root == new_root
    if old == 0:
        return not path  # every tree extends the empty one
    if not path:
        return False
    hashes = list(path)
    if old & (old - 1) == 0:  # old is a power of two: its root is a node of the new tree
        hashes.insert(0, old_root)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = hashes[0]
    for c in hashes[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root

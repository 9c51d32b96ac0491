"""The room's Merkle tree on disk: kept as lines are appended, rebuilt from the room at will.

One file per level in `<room>.tlog/` (`level-00` the leaf hashes, `level-01`
the hashes of pairs of them, …), each a run of 32-byte hashes: node i of
level L covers the leaves [i·2^L, (i+1)·2^L). A node is written once, when
its subtree is complete, and never changes; so any perfect subtree is one
`pread`, the root of any size is a fold of at most log2(n) of them, and an
RFC 9162 proof (trust/merkle.py) reads O(log n) nodes. The right edge (the
last node of each level whose count is odd) is also held in memory, which
makes the current root free.

The files are derived data: appends are not fsynced one by one (the room's
own fsync is what makes a line durable); `sync()` runs before a checkpoint
is signed. Opening repairs what a crash can leave (a torn hash, an upper
level short of its leaves) and `Tree.check_against` tells the hub when the
files disagree with the room or its signed checkpoint, so it rebuilds.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from trust import merkle

HASH = 32
FLUSH_BYTES = 64 * 1024  # leaf hashes held before a write: 2,048 lines


def tree_dir(room: Path) -> Path:
    return room.with_name(room.name + ".tlog")


class Tree:
    """The tree over the first `size` lines of a room; `append` takes the next lines."""

    def __init__(self, folder: Path, *, readonly: bool = False) -> None:
        """`readonly`: an auditor's look at a hub's files (it may be running): nothing is
        created or repaired, and a tree that does not match its signed root is simply not
        used."""
        self.folder = folder
        self.readonly = readonly
        if not readonly:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._fds: list[int] = []
        self._counts: list[int] = []  # nodes per level, written or waiting
        self._written: list[int] = []  # of those, in the file
        self._pending: list[bytearray] = []  # the rest, in order
        self._edge: list[bytes | None] = []  # the last node of level L when its count is odd
        if readonly:
            self._open_readonly()
        else:
            self._open_levels()

    # -- files ---------------------------------------------------------------

    def _level_path(self, level: int) -> Path:
        return self.folder / f"level-{level:02d}"

    def _add_level(self) -> None:
        level = len(self._fds)
        fd = os.open(
            self._level_path(level), os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600
        )
        self._fds.append(fd)
        self._counts.append(os.fstat(fd).st_size // HASH)
        self._written.append(self._counts[-1])
        self._pending.append(bytearray())
        self._edge.append(None)

    def _open_readonly(self) -> None:
        level = 0
        while self._level_path(level).exists():
            fd = os.open(self._level_path(level), os.O_RDONLY | os.O_CLOEXEC)
            self._fds.append(fd)
            self._counts.append(os.fstat(fd).st_size // HASH)
            self._written.append(self._counts[-1])
            self._pending.append(bytearray())
            self._edge.append(None)
            level += 1
        if not self._fds:
            raise FileNotFoundError(f"no tree in {self.folder}")
        # A running hub may be mid-append: only what a signed root covers is ever used.

    def _open_levels(self) -> None:
        self._add_level()
        leaves = self._counts[0]
        os.ftruncate(self._fds[0], leaves * HASH)  # a torn last hash
        level = 1
        while (leaves >> level) or self._level_path(level).exists():
            self._add_level()
            want = leaves >> level
            if self._counts[level] != want:  # a crash between levels: redo it from below
                self._rebuild_level(level, want)
            level += 1
        for lvl, count in enumerate(self._counts):
            self._edge[lvl] = self._node(lvl, count - 1) if count & 1 else None
        self._trim_empty_levels()

    def _rebuild_level(self, level: int, want: int) -> None:
        below = os.pread(self._fds[level - 1], want * 2 * HASH, 0)
        nodes = b"".join(
            merkle.node_hash(below[i : i + HASH], below[i + HASH : i + 2 * HASH])
            for i in range(0, want * 2 * HASH, 2 * HASH)
        )
        os.ftruncate(self._fds[level], 0)
        os.write(self._fds[level], nodes)
        self._counts[level] = self._written[level] = want

    def _trim_empty_levels(self) -> None:
        while len(self._fds) > 1 and self._counts[-1] == 0:
            os.close(self._fds.pop())
            self._counts.pop()
            self._written.pop()
            self._pending.pop()
            self._edge.pop()
            self._level_path(len(self._fds)).unlink(missing_ok=True)

    def _node(self, level: int, index: int) -> bytes:
        written = self._written[level]
        if index >= written:  # still in memory
            start = (index - written) * HASH
            return bytes(self._pending[level][start : start + HASH])
        return os.pread(self._fds[level], HASH, index * HASH)

    # -- the tree ------------------------------------------------------------

    @property
    def size(self) -> int:
        return self._counts[0]

    def append(self, lines: Iterable[bytes]) -> None:
        """Add the next lines (exact bytes, no newline), in seq order.

        New nodes wait in memory (`_pending`) and reach the files in runs of
        FLUSH_BYTES, or at `sync`: one write per level per run, not per line.
        """
        sha256, counts, edge, pending = hashlib.sha256, self._counts, self._edge, self._pending
        for line in lines:
            value, level = sha256(b"\x00" + line).digest(), 0
            while True:
                if level == len(counts):
                    self._add_level()
                pending[level] += value
                counts[level] += 1
                if counts[level] & 1:
                    edge[level] = value
                    break
                left = edge[level]
                assert left is not None
                edge[level] = None
                value = sha256(b"\x01" + left + value).digest()
                level += 1
        if len(pending[0]) >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write the nodes held in memory to their level files."""
        for level, waiting in enumerate(self._pending):
            if waiting:
                os.write(self._fds[level], waiting)
                self._written[level] += len(waiting) // HASH
                waiting.clear()

    def root(self, size: int | None = None) -> bytes:
        """MTH of the first `size` leaves (all of them by default)."""
        size = self.size if size is None else size
        if not 0 <= size <= self.size:
            raise merkle.ProofError(f"the tree holds {self.size} leaves, not {size}")
        if size == self.size and not self.readonly:  # a reader's files have no edge loaded
            value: bytes | None = None
            for edge in self._edge:  # lowest level first: the smallest subtree is rightmost
                if edge is not None:
                    value = edge if value is None else merkle.node_hash(edge, value)
            return merkle.EMPTY_ROOT if value is None else value
        return self.range_hash(0, size) if size else merkle.EMPTY_ROOT

    def range_hash(self, lo: int, hi: int) -> bytes:
        """MTH of the leaves [lo, hi), lo aligned as RFC 9162's splits leave it."""
        parts: list[bytes] = []
        while lo < hi:
            level = (lo & -lo).bit_length() - 1 if lo else 63
            while (1 << level) > hi - lo:
                level -= 1
            parts.append(self._node(level, lo >> level))
            lo += 1 << level
        value = parts.pop()
        while parts:
            value = merkle.node_hash(parts.pop(), value)
        return value

    def _checked(self, size: int) -> None:
        if size > self.size:
            raise merkle.ProofError(
                f"the tree holds {self.size} lines; ask for a size of at most {self.size}"
            )

    def inclusion(self, index: int, size: int) -> list[bytes]:
        self._checked(size)
        return merkle.inclusion_proof(index, size, self._memo())

    def consistency(self, old: int, new: int) -> list[bytes]:
        self._checked(new)
        return merkle.consistency_proof(old, new, self._memo())

    def _memo(self) -> merkle.RangeHash:
        """range_hash, remembering within one proof (its right-edge ranges share parts)."""
        seen: dict[tuple[int, int], bytes] = {}

        def mth(lo: int, hi: int) -> bytes:
            if (lo, hi) not in seen:
                seen[(lo, hi)] = self.range_hash(lo, hi)
            return seen[(lo, hi)]

        return mth

    def levels_agree(self, chunk: int = 8192) -> bool:
        """Whether every stored node is the hash of the two below it (a flipped byte in any
        level file shows here); O(n) hashes, read in chunks, run once at start-up."""
        self.flush()
        for level in range(1, len(self._fds)):
            for start in range(0, self._counts[level], chunk):
                count = min(chunk, self._counts[level] - start)
                below = os.pread(self._fds[level - 1], 2 * count * HASH, 2 * start * HASH)
                nodes = os.pread(self._fds[level], count * HASH, start * HASH)
                made = b"".join(
                    hashlib.sha256(b"\x01" + below[i : i + 2 * HASH]).digest()
                    for i in range(0, 2 * count * HASH, 2 * HASH)
                )
                if made != nodes:
                    return False
        return True

    def leaf(self, index: int) -> bytes:
        return self._node(0, index)

    # -- keeping it true to the room -------------------------------------------

    def truncate(self, size: int) -> None:
        """Forget every leaf from `size` on (the room was cut back, or is rebuilt)."""
        self.flush()
        for level, fd in enumerate(self._fds):
            count = min(self._counts[level], size >> level)
            os.ftruncate(fd, count * HASH)
            self._counts[level] = self._written[level] = count
            self._edge[level] = self._node(level, count - 1) if count & 1 else None
        self._trim_empty_levels()

    def sync(self) -> None:
        """Make the files durable: a signed checkpoint must never name a tree a crash loses."""
        self.flush()
        self.fsync()

    def fsync(self) -> None:
        """fsync what `flush` wrote; safe off the thread that appends (it touches no buffer)."""
        for fd in list(self._fds):
            os.fsync(fd)

    def close(self) -> None:
        """Flush and close; the files are closed even when the flush fails (a full disk)."""
        try:
            if not self.readonly:
                self.flush()
        finally:
            for fd in self._fds:
                os.close(fd)
            self._fds = []

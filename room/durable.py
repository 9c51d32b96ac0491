"""The durable mark: how much of the room is on disk, published beside it after every fsync.

The hub acknowledges a line only after its batch is fsynced, but the bytes
are in the file (and visible to anyone tailing it) from the moment of the
write. A reader that acts on a line before its fsync can act on a line a
power loss then takes back. So after each group commit the hub pwrites one
fixed-size record to `<room>.durable`: the seq, the byte offset just past
it, and that line's hash. File followers deliver a line only when the mark
covers it; recovery uses the mark as a floor (lines below it were fsynced,
so damage there is not a torn write).

Why a pwritten file and not shared memory or a pipe: readers already watch
the room's folder with inotify, so the mark's own IN_MODIFY wakes them with
no new mechanism, across processes and users who may read the room; it costs
one small pwrite per batch (microseconds, no fsync) and survives a restart.
It is never fsynced on its own, so after a power loss it may lag what is on
disk, never lead it: it is written only after the fsync it reports returned.
A lagging mark only makes readers wait for the next hub to publish again.

The record carries a CRC, so a record torn by a crash reads as "no mark"
rather than as a wrong one.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from room.fileio import fsync_dir

_MAGIC = b"bullpen-durable-1"
# magic, seq, offset, hash, crc: fixed width, so each pwrite replaces the whole record.
RECORD_BYTES = len(_MAGIC) + 1 + 20 + 1 + 20 + 1 + 64 + 1 + 8 + 1


@dataclass(frozen=True)
class Mark:
    seq: int
    offset: int  # just past `seq`'s line: every byte before it was fsynced
    hash: str  # line_hash of `seq`'s line (GENESIS for an empty room)


def mark_path(room: Path) -> Path:
    return room.with_name(room.name + ".durable")


def encode(mark: Mark) -> bytes:
    body = b"%s %020d %020d %s" % (_MAGIC, mark.seq, mark.offset, mark.hash.encode("ascii"))
    return body + b" %08x\n" % zlib.crc32(body)


def decode(raw: bytes) -> Mark | None:
    """The mark in `raw`, or None when it is not one whole, intact record."""
    if len(raw) < RECORD_BYTES or raw[RECORD_BYTES - 1 : RECORD_BYTES] != b"\n":
        return None
    parts = raw[: RECORD_BYTES - 1].split(b" ")
    if len(parts) != 5 or parts[0] != _MAGIC or len(parts[3]) != 64:
        return None
    body = b" ".join(parts[:4])
    try:
        if int(parts[4], 16) != zlib.crc32(body):
            return None
        return Mark(int(parts[1]), int(parts[2]), parts[3].decode("ascii"))
    except ValueError:
        return None


def load(room: Path) -> Mark | None:
    """The mark beside `room`, or None when there is none (a room from an older hub, a copy)."""
    try:
        with open(mark_path(room), "rb") as f:
            return decode(f.read(RECORD_BYTES))
    except FileNotFoundError:
        return None


class MarkWriter:
    """The hub's side: one file, created once, rewritten in place after every fsync."""

    def __init__(self, room: Path) -> None:
        self.path = mark_path(room)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        # Its name must survive a power loss, or readers would fall back to reading
        # every whole line; the content may lag, which only makes them wait.
        fsync_dir(self.path.parent)

    def publish(self, mark: Mark) -> None:
        os.pwrite(self._fd, encode(mark), 0)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class MarkReader:
    """A follower's side: the offset readers may deliver up to, for a given file size."""

    def __init__(self, room: Path) -> None:
        self.path = mark_path(room)
        self._fd: int | None = None

    def limit(self, size: int) -> int:
        """How far into a room of `size` bytes lines are durable.

        With no mark beside the room (not written by a hub, or by an older
        one) every whole line counts, as before the mark existed. A mark file
        that holds no whole record (a hub just starting, a record torn by a
        crash) counts as nothing durable yet: the hub publishes one as soon
        as it has recovered the room.
        """
        try:
            if self._fd is None or os.fstat(self._fd).st_nlink == 0:
                self.close()
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            mark = decode(os.pread(self._fd, RECORD_BYTES, 0))
        except FileNotFoundError:
            return size
        return 0 if mark is None else min(size, mark.offset)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def durable_end(room: Path, size: int) -> int:
    """MarkReader.limit once, for a reader that looks only now (a start position, a read)."""
    reader = MarkReader(room)
    try:
        return reader.limit(size)
    finally:
        reader.close()

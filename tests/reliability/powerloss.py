"""A write layer that loses power: what a crash leaves of writes that were never fsynced.

Like SQLite's crash-test VFS, PowerLossIO writes through to the real file (so
the process sees what it wrote) but remembers how much of the file an fsync
has made durable. At a chosen operation the power fails: a write may have
reached the page cache only in part, an fsync may or may not have taken
effect. `disk_after_crash` then builds what the disk could hold afterwards:
the durable prefix intact, and the unsynced rest kept, dropped, cut short or
damaged sector by sector (each 512-byte sector kept, zeroed or garbled, and
the file's size anywhere between the two).
"""

from __future__ import annotations

import os
import random

from room.fileio import FileIO

SECTOR = 512
MODES = ("keep", "drop", "cut", "sectors")


class PowerCut(Exception):
    """The simulated power failure; the writer dies with it, as a process would."""


class PowerLossIO(FileIO):
    def __init__(self, crash_at: int | None, rng: random.Random) -> None:
        self.crash_at = crash_at
        self.rng = rng
        self.ops = 0
        self.durable = 0
        self.crashed = False

    def _due(self) -> bool:
        if self.crashed:
            raise PowerCut("the power is already off")
        self.ops += 1
        if self.ops == self.crash_at:
            self.crashed = True
            return True
        return False

    def write(self, fd: int, data: bytes) -> int:
        if self._due():
            os.write(fd, data[: self.rng.randint(0, len(data))])  # torn in the page cache
            raise PowerCut("power failed during a write")
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        if self._due():
            if self.rng.random() < 0.5:  # the sync finished just before the power went
                self.durable = os.fstat(fd).st_size
            raise PowerCut("power failed during an fsync")
        self.durable = os.fstat(fd).st_size  # simulated: the model, not the disk, is what counts

    def truncate(self, fd: int, size: int) -> None:
        if self.crashed:
            raise PowerCut("the power is off")
        os.ftruncate(fd, size)
        self.durable = min(self.durable, size)


def disk_after_crash(
    written: bytes, durable: int, mode: str, rng: random.Random, damage: float | None = None
) -> bytes:
    """What the disk may hold after the power failed: `written[:durable]` always survives.

    In "sectors" mode each unsynced sector is damaged (zeroed or garbled) with
    probability `damage`, chosen at random when not given: heavy damage tears
    every line, light damage leaves whole lines after a damaged one.
    """
    unsynced = len(written) - durable
    if mode == "keep":
        return written
    if mode == "drop":
        return written[:durable]
    size = durable + rng.randint(0, unsynced)
    if mode == "cut":
        return written[:size]
    rate = rng.choice((0.5, 0.05, 0.005)) if damage is None else damage
    image = bytearray(written[:size])
    start = durable - durable % SECTOR
    for sector in range(start, size, SECTOR):
        lo, hi = max(sector, durable), min(sector + SECTOR, size)
        if rng.random() >= rate:
            continue  # this sector reached the disk
        if rng.random() < 0.6:
            image[lo:hi] = bytes(hi - lo)  # never written: reads back as zeros
        else:
            image[lo:hi] = rng.randbytes(hi - lo)  # torn or garbled
    return bytes(image)

"""The write layer under the JSONL log, with a fault-injecting variant for tests.

Like SQLite's test VFS, the log's three durable operations go through one
small object, so the reliability suites can make a real hub process meet
ENOSPC, EIO or a short write at a chosen moment. The faulty layer is only
ever chosen by the BULLPEN_FAULTS environment variable:

    BULLPEN_FAULTS="enospc@write:12"   the 12th write raises ENOSPC
    BULLPEN_FAULTS="eio@fsync:3"       the 3rd fsync raises EIO
    BULLPEN_FAULTS="short@write:5"     the 5th write stores only half its bytes
    BULLPEN_FAULTS="delay@fsync:4:1500"  the 4th fsync takes 1.5 s longer (a slow disk:
                                         the batch is written, not yet durable)

Counting starts when the hub opens the room: recovery's fsync at start-up is
the 1st fsync (and its truncate, when it moves a torn tail aside, goes
through the layer too), so `eio@fsync:1` fails the start itself.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path


class FileIO:
    """Plain POSIX calls."""

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)


class FaultyIO(FileIO):
    """Fails one chosen call the way a full or failing disk would."""

    def __init__(self, kind: str, op: str, nth: int, delay_ms: int = 0) -> None:
        self.kind, self.op, self.nth = kind, op, nth
        self.delay_ms = delay_ms
        self.counts = {"write": 0, "fsync": 0}

    def _due(self, op: str) -> bool:
        self.counts[op] += 1
        return op == self.op and self.counts[op] == self.nth

    def write(self, fd: int, data: bytes) -> int:
        if self._due("write"):
            if self.kind == "delay":
                time.sleep(self.delay_ms / 1000)
                return os.write(fd, data)
            if self.kind == "short":
                return os.write(fd, data[: max(1, len(data) // 2)])
            raise OSError(errno.ENOSPC if self.kind == "enospc" else errno.EIO, "injected fault")
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        if self._due("fsync"):
            if self.kind == "delay":
                time.sleep(self.delay_ms / 1000)  # the injected slow disk itself
                os.fsync(fd)
                return
            raise OSError(errno.EIO if self.kind == "eio" else errno.ENOSPC, "injected fault")
        os.fsync(fd)


def from_environment() -> FileIO:
    spec = os.environ.get("BULLPEN_FAULTS", "").strip()
    if not spec:
        return FileIO()
    try:
        kind, rest = spec.split("@", 1)
        op, nth, *ms = rest.split(":")
        if kind not in ("enospc", "eio", "short", "delay") or op not in ("write", "fsync"):
            raise ValueError
        if len(ms) != (1 if kind == "delay" else 0):
            raise ValueError
        return FaultyIO(kind, op, int(nth), int(ms[0]) if ms else 0)
    except ValueError:
        raise SystemExit(
            f"BULLPEN_FAULTS={spec!r} is not understood; use KIND@OP:N with KIND one of "
            "enospc, eio, short and OP one of write, fsync, or delay@OP:N:MS"
        ) from None


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in `path` durable: fsync the folder itself."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""An exclusive lock held for a process's lifetime, naming the pid that holds it.

The kernel drops a flock when its holder dies, however it dies, so a crash
never leaves a stale lock behind; the pid written inside is only for the
message that tells a person which process to stop.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class Held(Exception):
    """Another live process holds the lock."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def take(path: Path) -> int:
    """Lock `path` for as long as the returned descriptor stays open; raise Held if taken."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise Held(holder) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd

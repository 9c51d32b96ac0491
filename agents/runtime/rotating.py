"""A child's log under `bullpen up`, rotated so a noisy child cannot fill the disk.

`up` reads each child's output through a pipe and writes it here. When the
file has reached `max_bytes`, it becomes `<name>.1` (the older ones move up
to `<name>.<keep>`, and the oldest is dropped) and a new file starts, so a
child's logs never hold more than about (keep + 1) × max_bytes. A file may
pass `max_bytes` by at most one read (64 KiB): rotation waits for the next
read rather than splitting one. Files are created 0600: a log may quote a
post, and the room is private to its user.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

CHUNK = 64 * 1024


class RotatingLog:
    def __init__(self, path: Path, max_bytes: int, keep: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.keep = keep
        self._fd = self._open()
        self.size = os.fstat(self._fd).st_size

    def _open(self) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
        return os.open(self.path, flags, 0o600)

    def _rotated(self, n: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{n}")

    def rotate(self) -> None:
        os.close(self._fd)
        for n in range(self.keep - 1, 0, -1):
            if self._rotated(n).exists():
                os.replace(self._rotated(n), self._rotated(n + 1))
        os.replace(self.path, self._rotated(1))
        self._fd = self._open()
        self.size = 0

    def write(self, data: bytes) -> None:
        if self.size >= self.max_bytes:
            self.rotate()
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self.size += len(data)

    def close(self) -> None:
        os.close(self._fd)


async def pump(
    stream: asyncio.StreamReader,
    log: RotatingLog,
    marker: bytes = b"",
    seen: asyncio.Event | None = None,
) -> None:
    """Copy a child's output into its log until the child closes it; then close the log.

    With `marker` and `seen`: set `seen` once the output holds `marker` (a
    lurker's `"lurking"` line), even when it is split across two reads.
    """
    tail = b""
    try:
        while chunk := await stream.read(CHUNK):
            if seen is not None and marker and not seen.is_set():
                if marker in tail + chunk:
                    seen.set()
                tail = chunk[-len(marker) :]
            try:
                log.write(chunk)
            except OSError:  # a full disk must not stop the child: its output is dropped
                continue
    finally:
        log.close()

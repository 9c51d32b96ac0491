"""Seen proof nonces, so a captured proof cannot be replayed, even across restarts.

A proof is accepted only within the hub's time window, so a nonce needs
remembering only for twice that long. Reservations are appended to a journal
beside the room; the log syncs the journal with every batch of lines, so a
post is never acknowledged while its nonce could still be forgotten.

A journal that cannot be written (a full or failing disk) refuses the post
with a DurabilityError (503) and makes the next sync fail, so the log stops
the hub exactly as when the room itself cannot be written.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from room.errors import DurabilityError
from room.fileio import fsync_dir

COMPACT_BYTES = 4 * 1024 * 1024


class NonceStore:
    def __init__(
        self,
        journal: Path | None,
        window_s: int = 120,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._journal = journal
        self._window = window_s
        self._clock = clock
        self._seen: dict[str, int] = {}  # nonce -> proof ts
        self._fd: int | None = None
        self._dirty = False
        self._size = 0
        self._lock = threading.Lock()
        self._broken: OSError | None = None

    def open(self) -> None:
        if self._journal is None:
            return
        cutoff = int(self._clock()) - 2 * self._window
        if self._journal.exists():
            for line in self._journal.read_bytes().split(b"\n"):
                parts = line.split(b" ")
                if len(parts) == 2 and parts[0].isdigit():
                    ts = int(parts[0])
                    if ts >= cutoff:
                        self._seen[parts[1].decode("ascii", "replace")] = ts
        self._rewrite()

    def _rewrite(self) -> None:
        """Replace the journal with only the nonces still inside the window."""
        assert self._journal is not None
        tmp = self._journal.with_name(self._journal.name + ".tmp")
        payload = "".join(f"{ts} {nonce}\n" for nonce, ts in self._seen.items()).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            _write_all(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self._journal)
        fsync_dir(self._journal.parent)  # the rename itself must survive a power loss
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self._journal, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        self._size = len(payload)

    def reserve(self, nonce: str, ts: int) -> bool:
        """Record a nonce; False when it was already used."""
        with self._lock:
            if self._broken is not None:
                raise self._refusal(self._broken)
            if nonce in self._seen:
                return False
            self._seen[nonce] = ts
            try:
                if self._fd is not None:
                    record = f"{ts} {nonce}\n".encode()
                    self._dirty = True
                    _write_all(self._fd, record)
                    self._size += len(record)
                if len(self._seen) % 1024 == 0:
                    self._expire()
            except OSError as exc:
                self._broken = exc
                raise self._refusal(exc) from None
            return True

    async def reserve_async(self, nonce: str, ts: int) -> bool:
        """`reserve` for the hub's event loop; a shared store (trust/streamnonces.py) awaits a
        round trip here, this one does not."""
        return self.reserve(nonce, ts)

    @staticmethod
    def _refusal(exc: OSError) -> DurabilityError:
        return DurabilityError(
            f"recording a proof's nonce failed ({exc.strerror or exc}); the hub stops "
            "acknowledging posts. Free space or fix the disk, then start the hub again",
            errno=exc.errno,
        )

    def _expire(self) -> None:
        cutoff = int(self._clock()) - 2 * self._window
        for nonce in [n for n, ts in self._seen.items() if ts < cutoff]:
            del self._seen[nonce]
        if self._journal is not None and self._size > COMPACT_BYTES:
            self._rewrite()

    def flush(self) -> None:
        """Make reservations durable; called by the log before it syncs a batch."""
        with self._lock:
            if self._broken is not None:
                raise OSError(
                    self._broken.errno, f"the nonce journal failed: {self._broken.strerror}"
                )
            if self._fd is None or not self._dirty:
                return
            self._dirty = False
            fd = self._fd
        os.fdatasync(fd)

    def close(self) -> None:
        """Sync and close; after a failure just close (every acknowledged nonce was synced)."""
        if self._fd is not None:
            if self._broken is None:
                self.flush()
            os.close(self._fd)
            self._fd = None


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte or raise: a short write on a nearly full disk is a failure."""
    written = os.write(fd, data)
    if written != len(data):
        raise OSError(errno.ENOSPC, f"short write: {written} of {len(data)} bytes")

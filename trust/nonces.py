"""Seen proof nonces, so a captured proof cannot be replayed, even across restarts.

A proof is accepted only within the hub's time window, so a nonce needs
remembering only for twice that long. The room itself is the record: a line
whose post carried a shared-secret proof keeps the proof's `nonce` (never its
HMAC), and a line signed with a nick's own key keeps its `sig`, nonce
included. Both reach the disk in the line's own fsync, so a post is never
acknowledged while its nonce could be forgotten, and no second sync is paid
per batch. At start the hub reads the room back from its tail for the lines
of the last two windows (`room_nonces`) and refuses their nonces again.

Rooms from before this kept their nonces in a journal beside the room
(`room.jsonl.nonces`); it is still read at start when present, so an upgrade
does not reopen the window, and no longer written.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path

from room import strictjson
from room.ids import rfc3339_ms
from room.reader import CHUNK, RoomFile

EXPIRE_EVERY = 1024  # reservations between two sweeps of the expired nonces


class NonceStore:
    synchronous = True  # reserve() answers at once (trust/streamnonces.py: a round trip)

    def __init__(
        self,
        journal: Path | None,
        window_s: int = 120,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._journal = journal  # the legacy journal: read at open, never written
        self._window = window_s
        self._clock = clock
        self._seen: dict[str, int] = {}  # nonce -> the time it expires from (proof or line ts)
        self._lock = threading.Lock()

    @property
    def window_s(self) -> int:
        return self._window

    def open(self, room: Path | None = None) -> None:
        """Remember the nonces still inside the window: the legacy journal's, then the room's."""
        cutoff = int(self._clock()) - 2 * self._window
        if self._journal is not None and self._journal.exists():
            for line in self._journal.read_bytes().split(b"\n"):
                parts = line.split(b" ")
                if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) >= cutoff:
                    self._seen[parts[1].decode("ascii", "replace")] = int(parts[0])
        if room is not None:
            self.remember(room_nonces(room, cutoff))

    def remember(self, nonces: Iterable[tuple[str, int]]) -> None:
        """Mark these (nonce, ts) as used, as a restart must (no check, no record)."""
        with self._lock:
            for nonce, ts in nonces:
                self._seen[nonce] = max(ts, self._seen.get(nonce, ts))

    def reserve(self, nonce: str, ts: int) -> bool:
        """Record a nonce; False when it was already used.

        The record is this process's memory until the post's line is stored:
        the line carries the nonce to the disk. A post refused after this (a
        limit, a failed write) stored nothing, so its proof is not spent
        across a restart; it is spent until then.
        """
        with self._lock:
            if nonce in self._seen:
                return False
            self._seen[nonce] = ts
            if len(self._seen) % EXPIRE_EVERY == 0:
                self._expire()
            return True

    async def reserve_async(self, nonce: str, ts: int) -> bool:
        """`reserve` for the hub's event loop; a shared store (trust/streamnonces.py) awaits a
        round trip here, this one does not."""
        return self.reserve(nonce, ts)

    def _expire(self) -> None:
        cutoff = int(self._clock()) - 2 * self._window
        for nonce in [n for n, ts in self._seen.items() if ts < cutoff]:
            del self._seen[nonce]

    def close(self) -> None:
        """Nothing to sync: every acknowledged nonce is in a line the room fsynced."""


def room_nonces(room: Path, cutoff: int) -> Iterator[tuple[str, int]]:
    """The proof nonces in the room's lines stamped at or after `cutoff` (Unix seconds), each
    with its line's time, read back from the tail.

    A line's time is a safe stand-in for its proof's: the hub took the proof
    only while its ts was within the window of the hub's clock, so a proof
    older than the line by more than the window could not be taken, and one
    newer expires by the line's time plus two windows, as it is kept here.
    Lines are stamped in order, so the walk stops at the first older one; the
    stamps are compared as text (RFC 3339 in UTC sorts as time), and only a
    line that holds a nonce is parsed.
    """
    if not room.exists():
        return
    oldest = rfc3339_ms(cutoff * 1000).encode()
    with RoomFile(room) as reader:
        for raw in _lines_backward(reader):
            stamp = _STAMP.match(raw)
            if stamp is None:
                continue  # not a hub-written line (recovery refuses a room of those)
            if stamp.group(1) < oldest:
                return
            if b'"nonce":' not in raw:
                continue
            try:
                obj = strictjson.loads(raw)
            except strictjson.JsonRejected:
                continue
            stamped = int(datetime.fromisoformat(stamp.group(1).decode()).timestamp())
            if isinstance(obj.get("nonce"), str):
                yield obj["nonce"], stamped
            sig = obj.get("sig")
            if isinstance(sig, dict) and isinstance(sig.get("nonce"), str):
                yield sig["nonce"], stamped


_STAMP = re.compile(rb'^\{"seq":\d+,"id":"[0-9A-Z]+","ts":"([0-9T:.Z-]+)"')


def _lines_backward(reader: RoomFile) -> Iterator[bytes]:
    """The room's whole lines, last first, read in large blocks from the end."""
    pos = reader.size()
    head = b""  # the start of a line whose beginning is in the block before
    while pos > 0:
        begin = max(0, pos - CHUNK)
        lines = (reader.pread(pos - begin, begin) + head).split(b"\n")
        head = lines[0] if begin > 0 else b""
        for line in reversed(lines[1:] if begin > 0 else lines):
            if line:
                yield line
        pos = begin

"""Which threads the room may hold: a Bloom filter, so a new thread is never searched for.

Every run starts a thread, and the first read of a thread the hub has not
indexed used to scan the whole room for it: with 60,000 lines anywhere in the
room, each new run paid for a scan. The hub surveys the room once (off its
event loop) to fill this filter, then adds each thread as its lines are
written. A thread the filter has never seen has no lines before now, so its
index starts empty and no scan is needed; a false "maybe" only costs the scan
it always cost. Bounded: 1 MiB whatever the room holds.
"""

from __future__ import annotations

import hashlib
import json
import re

BITS = 1 << 23  # 1 MiB: about a 2% false "maybe" at a million threads
HASHES = 7
# Every `"thread":"…"` in a stored line; a line holds its own thread among them (a superset is
# safe: a thread wrongly marked only costs a scan).
_THREAD = re.compile(rb'"thread":("(?:[^"\\]|\\.)*")')


class ThreadFilter:
    """A Bloom filter of thread names; `complete` once every stored line is in it."""

    def __init__(self) -> None:
        self._bits = bytearray(BITS // 8)
        self.complete = False

    @staticmethod
    def _positions(thread: str) -> list[int]:
        digest = hashlib.blake2b(thread.encode("utf-8", "surrogatepass"), digest_size=32).digest()
        return [int.from_bytes(digest[4 * i : 4 * i + 4], "little") % BITS for i in range(HASHES)]

    def add(self, thread: str) -> None:
        for bit in self._positions(thread):
            self._bits[bit >> 3] |= 1 << (bit & 7)

    def may_hold(self, thread: str) -> bool:
        """False only when the room holds no line of `thread` (once complete)."""
        return not self.complete or all(
            self._bits[bit >> 3] & (1 << (bit & 7)) for bit in self._positions(thread)
        )

    def merge(self, other: ThreadFilter) -> None:
        """Add every thread `other` holds (on the event loop: never while another thread adds)."""
        size = len(self._bits)
        both = int.from_bytes(self._bits, "little") | int.from_bytes(other._bits, "little")
        self._bits = bytearray(both.to_bytes(size, "little"))

    def add_line(self, raw: bytes) -> None:
        """Every thread a stored line may be in."""
        for quoted in _THREAD.findall(raw):
            try:
                self.add(json.loads(quoted))
            except ValueError:
                continue

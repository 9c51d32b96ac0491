"""What the foreman has already read of each run's thread, so a wake reads only what is new.

The room stays the foreman's truth: this is a cache of the thread's verified
lines from trusted nicks (the only ones a Run counts), rebuilt from the room
after a restart. Each wake reads from the last seq seen, with the hub
filtering out every line nobody trusts, so a thread stuffed with unverified
lines costs the foreman nothing. Reads happen outside the foreman's lock;
merging and deciding happen inside it.

It also remembers the keys the foreman decided to post that the room does not
show yet (the lurker posts them after the decision): a tick and a wake deciding
one after the other, before the first one's posts land, never post a key twice.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

from room.message import Message

MAX_THREADS = 512  # threads remembered; an open run's thread is never dropped
CLAIM_TTL_S = 120.0  # a decided post the room never showed (rejected) may be decided again


@dataclass
class Seen:
    """One thread: its trusted verified lines through seq `last`, and keys not yet seen."""

    messages: list[Message] = field(default_factory=list)
    last: int = 0
    claimed: dict[str, tuple[bool, float]] = field(default_factory=dict)  # key: (ask?, when)

    def merge(self, after: int, fresh: list[Message], last: int) -> bool:
        """Add a read covering (after, last]; False when it leaves a gap (read again from
        `self.last`). Reads that overlap are fine: only lines beyond `self.last` are added."""
        if after > self.last:
            return False
        if last > self.last:
            self.messages += [m for m in fresh if m.seq > self.last]
            self.last = last
        return True

    def unposted(self, posted: set[str], now: float) -> dict[str, bool]:
        """Keys decided but not yet in the thread (key: is an ask); forgets those that are."""
        for key in [
            k for k, (_, when) in self.claimed.items() if k in posted or now - when > CLAIM_TTL_S
        ]:
            del self.claimed[key]
        return {key: ask for key, (ask, _) in self.claimed.items()}

    def claim(self, key: str, ask: bool) -> None:
        self.claimed[key] = (ask, time.monotonic())


class SeenThreads:
    """Seen per thread, the least recently used dropped beyond MAX_THREADS unless open."""

    def __init__(self) -> None:
        self._threads: OrderedDict[str, Seen] = OrderedDict()

    def after(self, thread: str) -> int:
        seen = self._threads.get(thread)
        return seen.last if seen is not None else 0

    def get(self, thread: str, open_runs: set[str]) -> Seen:
        seen = self._threads.get(thread)
        if seen is None:
            seen = self._threads[thread] = Seen()
            self._trim(open_runs)
        self._threads.move_to_end(thread)
        return seen

    def _trim(self, open_runs: set[str]) -> None:
        for thread in list(self._threads):
            if len(self._threads) <= MAX_THREADS:
                return
            if thread not in open_runs:
                del self._threads[thread]

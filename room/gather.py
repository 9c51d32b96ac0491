"""When the room's next batch starts: at once, or once the last batch's posters are back.

Group commit shares one fsync among the posts queued while the one before it
ran. With several clients that each wait for their answer before posting
again, that alone splits them into two halves that take turns: the half
answered by one fsync posts again while the other half's fsync runs, so each
fsync carries about half of them, and every fsync costs the hub its system
time and two thread hand-offs (docs/performance.md). So after a batch the
writer waits for as many posts as there are posters in flight (the batch
just answered and the posts already queued), at most about one fsync's time:
the answered posters are usually back by then, and one fsync carries them
all. A lone poster never waits (a batch of one wants one post), and after a
wait nobody ended (posters that post once) the next batch goes at once.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

MAX_LINGER_S = 0.002  # the longest a queued post waits for the others (a slow disk's fsync)


class Gathering:
    """How many queued posts start the next batch, and the timer that gives up waiting."""

    def __init__(self, kick: Callable[[], None]) -> None:
        self._kick = kick
        self._want = 1
        self._timer: asyncio.TimerHandle | None = None
        self._patient = True  # False right after a wait nobody ended: the next batch goes at once

    def queued(self, count: int) -> None:
        """A post joined the queue, which now holds `count`: kick the writer when enough."""
        if count >= self._want:
            self._start()

    def writing(self) -> None:
        """A batch is being written: posts queued meanwhile wait for it (`written` decides)."""
        self._cancel()
        self._want = sys.maxsize

    def written(self, answered: int, queued: int, sync_s: float) -> None:
        """A batch of `answered` posts is on disk and answered, `queued` posts wait: the next
        batch wants them all, for at most the time that batch's write and fsync took."""
        want = answered + queued
        if want <= 1 or not self._patient:
            self._patient = True
            self._want = 1
            if queued:
                self._kick()
            return
        self._want = want
        linger = min(MAX_LINGER_S, sync_s)
        self._timer = asyncio.get_running_loop().call_later(linger, self._give_up)

    def _give_up(self) -> None:
        """Not every poster came back in time (one posted once, a client is slow): the queue
        goes as it is, and the batch after it does not wait either."""
        self._timer = None
        self._patient = False
        self._want = 1
        self._kick()  # an empty queue: the writer waits for the next post as usual

    def _start(self) -> None:
        self._cancel()
        self._want = 1
        self._kick()

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        """No more waiting: the writer takes whatever is queued (the room is closing)."""
        self._start()

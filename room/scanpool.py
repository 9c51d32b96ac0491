"""Scans of the room file on a bounded pool of threads of their own.

A read the hub cannot answer from memory (a thread it has not indexed, a
thread's old lines, a filtered read from far back) scans the file on a worker
thread. That work holds the GIL (bytes.find, json, the Python around them),
and the event loop needs the GIL back after every blocking call a post
makes: with six scans on the default executor, each return could wait on a
scan for up to the interpreter's switch interval (5 ms). Bounded here, the
loop has at most `threads` such competitors; the other scans wait in the
pool's queue, in order, and the default executor stays free for the hub's
other work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

SCAN_THREADS = 1


class ScanPool:
    """Runs scans off the event loop, at most `threads` at once."""

    def __init__(self, threads: int = SCAN_THREADS) -> None:
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None

    async def run(self, scan: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="room-scan")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, partial(scan, *args, **kwargs))

    async def close(self) -> None:
        """Drop the scans not started and wait for the one running, so none reads on after
        the file it scans is closed."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
            await asyncio.to_thread(pool.shutdown)

"""The room writer's own thread: each batch's write and fsync, off the event loop.

The event loop must keep serving (reads, health, the next posts) while a
batch is synced, so the sync runs on a thread. An executor hands each batch
over through a work item, a concurrent future with its condition and locks,
and a second future chained to the loop; a post from a lone client pays that
per post. Here one long-lived thread takes (work, future) pairs from a
SimpleQueue and settles the loop's future with one `call_soon_threadsafe`:
one wake each way per batch, nothing more.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable


class SyncThread:
    """Runs `work(blob)` calls one at a time, in order, on a thread of its own."""

    def __init__(self, work: Callable[[bytes], None], name: str = "room-writer") -> None:
        self._work = work
        self._jobs: queue.SimpleQueue[tuple[bytes, asyncio.Future[None]] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._name = name

    async def run(self, blob: bytes) -> None:
        """`work(blob)` on the thread; its exception, if any, is raised here."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()
        done = asyncio.get_running_loop().create_future()
        self._jobs.put((blob, done))
        await done

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            blob, done = job
            error: BaseException | None = None
            try:
                self._work(blob)
            except BaseException as exc:  # handed to the awaiting writer, which fails stop
                error = exc
            try:
                done.get_loop().call_soon_threadsafe(_settle, done, error)
            except RuntimeError:  # the loop is closed: nobody waits for this batch any more
                return

    def stop(self) -> None:
        """No more work: the thread ends once the jobs before this are done."""
        if self._thread is not None:
            self._jobs.put(None)


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.cancelled():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)

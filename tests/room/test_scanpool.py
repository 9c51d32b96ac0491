"""ScanPool: room scans run off the event loop, at most its bound at once, all answered."""

from __future__ import annotations

import asyncio
import threading

from room.scanpool import ScanPool


def test_scans_beyond_the_bound_wait_and_every_one_is_answered() -> None:
    running, most = 0, 0
    count = threading.Lock()
    release = threading.Event()

    def scan(n: int) -> int:
        nonlocal running, most
        with count:
            running += 1
            most = max(most, running)
        assert release.wait(10), "the test never let the scans go"
        with count:
            running -= 1
        return n * n

    async def main() -> list[int]:
        pool = ScanPool(threads=2)
        tasks = [asyncio.ensure_future(pool.run(scan, n)) for n in range(8)]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while running < 2 and loop.time() < deadline:
            await asyncio.sleep(0.01)  # the loop stays free while the scans hold their threads
        assert running == 2
        release.set()
        results = await asyncio.gather(*tasks)
        await pool.close()
        return results

    assert asyncio.run(main()) == [n * n for n in range(8)]
    assert most == 2


def test_close_drops_the_queued_scans_and_waits_for_the_running_one() -> None:
    started = threading.Event()
    release = threading.Event()
    ran: list[int] = []

    def scan(n: int) -> None:
        started.set()
        assert release.wait(10)
        ran.append(n)

    async def main() -> None:
        pool = ScanPool(threads=1)
        first = asyncio.ensure_future(pool.run(scan, 0))
        queued = [asyncio.ensure_future(pool.run(scan, n)) for n in (1, 2)]
        assert await asyncio.to_thread(started.wait, 10)
        closing = asyncio.ensure_future(pool.close())
        done, _ = await asyncio.wait([closing], timeout=0.2)
        assert not done  # close waits while the running scan has not ended
        release.set()
        await closing
        assert ran == [0]  # ended before close returned; the queued two never ran
        await first
        for task in queued:
            assert task.cancelled()

    asyncio.run(main())
    assert ran == [0]

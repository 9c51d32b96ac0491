"""A hostile local client: holds N connections to a hub, reopening each one the hub cuts (0.2 s later).

    python bench/flood_client.py HOST PORT MODE N SECONDS

MODE is `idle` (connect, send nothing), `half` (send half a request head,
then nothing) or `trickle` (send a request head one byte every 0.5 s).
Runs until its stdin closes or SECONDS pass, then prints one line: `opened=… cut=… max_held=…`.
Each line `counts` on its stdin prints that line at once and goes on, so a test can wait
for the cuts it expects instead of guessing how long they take. Used by bench/flood.py and
tests/room/test_flood.py; every socket is its own.
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys

HALF = b"GET /read?after=0 HTTP/1.1\r\nHost: hub\r\nX-Pad: "
REOPEN_S = 0.2  # how soon a cut connection is opened again
TRICKLE = b"GET /health HTTP/1.1\r\nHost: hub\r\nX-Slow: " + b"a" * 4000 + b"\r\n\r\n"


class Counts:
    opened = 0
    cut = 0
    held = 0
    max_held = 0


async def hold(host: str, port: int, mode: str, counts: Counts) -> None:
    """Keep one connection open in `mode`, reopening it whenever it is cut (until cancelled)."""
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        counts.opened += 1
        counts.held += 1
        counts.max_held = max(counts.max_held, counts.held)
        try:
            if mode == "trickle":
                for pos in range(len(TRICKLE)):
                    writer.write(TRICKLE[pos : pos + 1])
                    await writer.drain()
                    # The pause between bytes watches the socket: a cut is seen when it
                    # happens, not at the next byte (a sleep here saw it up to 0.5 s late).
                    try:
                        if not await asyncio.wait_for(reader.read(65536), 0.5):
                            break  # the hub closed it
                    except TimeoutError:
                        continue
            else:
                if mode == "half":
                    writer.write(HALF)
                while await reader.read(65536):
                    pass
            counts.cut += 1
        except OSError:
            counts.cut += 1
        finally:
            counts.held -= 1
            writer.close()
        await asyncio.sleep(REOPEN_S)  # a client that holds its sockets, not a SYN flood


def report(counts: Counts) -> None:
    print(f"opened={counts.opened} cut={counts.cut} max_held={counts.max_held}", flush=True)


async def answer_until_stdin_closes(counts: Counts) -> None:
    """Print the counts for each `counts` line on stdin; return when stdin closes."""
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        if line.strip() == "counts":
            report(counts)


async def main(host: str, port: int, mode: str, n: int, seconds: float) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    counts = Counts()
    tasks = []
    for _ in range(n):  # open in waves, as a flood would, without a thundering herd of SYNs
        tasks.append(asyncio.create_task(hold(host, port, mode, counts)))
        if len(tasks) % 500 == 0:
            await asyncio.sleep(0.05)
    print("started", flush=True)
    answering = asyncio.create_task(answer_until_stdin_closes(counts))
    await asyncio.wait([answering], timeout=seconds)  # until its stdin closes, or `seconds`
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    report(counts)
    # The stdin reader's thread may still be blocked in readline: leave without joining it.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    h, p, m, count, secs = sys.argv[1:6]
    asyncio.run(main(h, int(p), m, int(count), float(secs)))

"""Group commit: one fsync carries every poster in flight, and a lone poster never waits.

The JSONL log runs here in-process on a real file, its fsync made slower by
a real delay on the writer's thread (a slow disk). Eight posters each post
again a few event-loop turns after their answer, as clients on a socket do:
the old writer took whatever was queued the moment the first of them was
back, so the posters split into small batches that took turns (about half
of them per fsync at best); the writer now waits, at most about one fsync's
time, for the posters it just answered (room/gather.py).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

from room.fileio import FileIO
from room.gather import Gathering
from room.jsonl import JsonlLog
from room.log import Draft
from room.message import Post

SLOW_FSYNC_S = 0.003


class SlowDisk(FileIO):
    """Real writes and fsyncs, each fsync SLOW_FSYNC_S longer, counted."""

    def __init__(self) -> None:
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        time.sleep(SLOW_FSYNC_S)
        os.fsync(fd)
        self.fsyncs += 1


def draft(nick: str, n: int) -> Draft:
    return Draft(
        Post.model_validate({"from": nick, "to": "@sink", "type": "chat", "body": f"{n}"}), False
    )


async def post_in_turns(path: Path, posters: int, each: int) -> tuple[int, int]:
    """`posters` posting `each` in turn, a few loop turns between an answer and the next
    post; the fsyncs it took (after the room's own at open) and the lines stored."""
    disk = SlowDisk()
    room = JsonlLog(path, io=disk)
    await room.open()
    at_open = disk.fsyncs
    rng = random.Random(38)

    async def poster(nick: str) -> None:
        for n in range(each):
            await room.append(draft(nick, n))
            for _ in range(rng.randint(1, 20)):  # the client's turn-around: read, build, send
                await asyncio.sleep(0)

    try:
        await asyncio.wait_for(
            asyncio.gather(*(poster(f"p{i}") for i in range(posters))), timeout=60
        )
        return disk.fsyncs - at_open, room.head.seq
    finally:
        await room.close()


def test_eight_posters_share_each_fsync(tmp_path: Path) -> None:
    fsyncs, stored = asyncio.run(post_in_turns(tmp_path / "room.jsonl", 8, 40))
    assert stored == 320
    # All eight in one fsync would be 40; the batches taking turns took 80 and more.
    assert fsyncs <= 56, f"{fsyncs} fsyncs for 320 posts by 8 posters: {320 / fsyncs:.1f} a batch"


def test_a_lone_poster_is_written_at_once(tmp_path: Path) -> None:
    """One poster: each post is its own batch, none waits for anyone (one fsync a post)."""
    fsyncs, stored = asyncio.run(post_in_turns(tmp_path / "room.jsonl", 1, 20))
    assert (fsyncs, stored) == (20, 20)


async def kicks_after(steps: list[tuple[str, int, int]]) -> list[int]:
    """Drive a Gathering by (`queued`, count) and (`written`, answered, queued) steps; how
    many kicks the writer got after each step."""
    kicks: list[int] = []
    count = 0

    def kick() -> None:
        nonlocal count
        count += 1

    gathering = Gathering(kick)
    for step in steps:
        if step[0] == "queued":
            gathering.queued(step[1])
        elif step[0] == "writing":
            gathering.writing()
        else:
            gathering.written(step[1], step[2], 10.0)
        kicks.append(count)
    gathering.close()
    return kicks


def test_the_next_batch_waits_for_every_poster_in_flight() -> None:
    kicks = asyncio.run(
        kicks_after(
            [
                ("queued", 1, 0),  # an idle writer: the first post starts a batch
                ("writing", 0, 0),
                ("queued", 1, 0),  # posts arriving during the fsync wait for it
                ("queued", 2, 0),
                ("written", 1, 2),  # one answered, two queued: the next batch wants three
                ("queued", 3, 0),  # the answered poster is back: go
            ]
        )
    )
    assert kicks == [1, 1, 1, 1, 1, 2]


def test_a_batch_of_one_asks_for_nobody() -> None:
    kicks = asyncio.run(kicks_after([("writing", 0, 0), ("written", 1, 0), ("queued", 1, 0)]))
    assert kicks == [0, 0, 1]


async def gives_up() -> tuple[bool, bool]:
    """A batch of eight answered and nobody comes back: is the writer kicked without a post
    (the wait gave up), and then does the next batch of eight go at once?"""
    kicked = asyncio.Event()
    gathering = Gathering(kicked.set)
    gathering.writing()
    gathering.written(8, 0, 0.001)
    try:
        await asyncio.wait_for(kicked.wait(), timeout=10)
    except TimeoutError:
        return False, False
    kicked.clear()
    gathering.writing()
    gathering.written(8, 1, 0.001)  # right after a wait nobody ended: no waiting
    return True, kicked.is_set()


def test_the_wait_for_posters_gives_up() -> None:
    assert asyncio.run(gives_up()) == (True, True)

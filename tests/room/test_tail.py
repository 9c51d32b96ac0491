"""Following a room file: new lines, replaced and truncated files, both watchers."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from room.chain import GENESIS, line_hash
from room.errors import CursorAhead
from room.message import Message
from room.tail import FileFollower, Position


class Writer:
    """Appends valid chained lines to a room file, as a hub would."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seq = 0
        self.prev = GENESIS

    def line(self, to: str = "@a", body: str = "x") -> bytes:
        self.seq += 1
        obj = {
            "seq": self.seq,
            "id": f"I{self.seq}",
            "ts": "t",
            "from": "op",
            "to": to,
            "type": "chat",
            "body": body,
            "data": None,
            "in_reply_to": None,
            "thread": None,
            "sig": None,
            "verified": True,
            "prev": self.prev,
        }
        raw = json.dumps(obj, separators=(",", ":")).encode()
        self.prev = line_hash(raw)
        return raw + b"\n"

    def append(self, **fields: str) -> None:
        with self.path.open("ab") as f:
            f.write(self.line(**fields))


async def first_read(follower: FileFollower) -> None:
    """Wait until the follower has read the file once: later writes must come by events."""
    for _ in range(1000):
        if follower.position.offset > 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the follower never read the room")


async def collect(
    follower: FileFollower, count: int, act: object = None, timeout: float = 10
) -> list[Message]:
    seen: list[Message] = []

    async def run() -> None:
        async for message, _ in follower.follow():
            seen.append(message)
            if len(seen) == count:
                return

    await asyncio.wait_for(run(), timeout)
    return seen


@pytest.mark.parametrize("watcher", ["inotify", "watchfiles"])
def test_follower_sees_appended_lines(tmp_path: Path, watcher: str) -> None:
    """Lines appended after the start position arrive in order, with either watcher."""
    room = tmp_path / "room.jsonl"
    writer = Writer(room)
    writer.append(body="old")

    async def scenario() -> list[Message]:
        follower = FileFollower(room, Position(1), safety_s=30, watcher=watcher)
        task = asyncio.ensure_future(collect(follower, 2))
        await first_read(follower)
        writer.append(body="new 1")
        writer.append(body="new 2")
        return await task

    seen = asyncio.run(scenario())
    assert [m.body for m in seen] == ["new 1", "new 2"]


def test_to_filter_skips_other_addressees(tmp_path: Path) -> None:
    """With `to`, lines addressed to others never come out, and the position still advances."""
    room = tmp_path / "room.jsonl"
    writer = Writer(room)
    for to in ("@a", "@b", "@a", "@c"):
        writer.append(to=to, body=to)

    async def scenario() -> list[Message]:
        return await collect(FileFollower(room, Position(0), to="@a"), 2)

    seen = asyncio.run(scenario())
    assert [m.seq for m in seen] == [1, 3]


def test_truncated_room_stops_the_follower(tmp_path: Path) -> None:
    """A room shorter than the reader's position raises CursorAhead instead of re-reading."""
    room = tmp_path / "room.jsonl"
    writer = Writer(room)
    for _ in range(3):
        writer.append()
    size = room.stat().st_size

    async def scenario() -> None:
        follower = FileFollower(room, Position(3, size))
        with room.open("r+b") as f:
            f.truncate(10)
        await collect(follower, 1)

    with pytest.raises(CursorAhead):
        asyncio.run(scenario())


def test_replaced_room_is_reopened_by_seq(tmp_path: Path) -> None:
    """A room replaced by a copy that continues it is reopened and followed from the same seq."""
    room = tmp_path / "room.jsonl"
    writer = Writer(room)
    writer.append(body="one")
    writer.append(body="two")

    async def scenario() -> list[Message]:
        follower = FileFollower(room, Position(2), safety_s=30)
        task = asyncio.ensure_future(collect(follower, 1))
        await first_read(follower)
        copy = tmp_path / "room.copy"
        copy.write_bytes(room.read_bytes() + writer.line(body="three"))
        os.replace(copy, room)
        return await task

    seen = asyncio.run(scenario())
    assert [m.body for m in seen] == ["three"]

"""The inotify watch wakes a follower once a post, on the durable mark, not on every write in
the room's folder (room/watch.py): with twenty lurkers on two cores, each extra wake is twenty."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from room.durable import mark_path
from room.watch import InotifyWatch


def held_open(path: Path) -> int:
    """A descriptor kept open, as the hub keeps its files: writes, and no close events."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def test_only_the_marks_writes_wake_the_watch_while_there_is_a_mark(tmp_path: Path) -> None:
    """A write to the nonce journal or to the room (not yet fsynced, so not deliverable) does
    not wake it; the mark's rewrite does."""
    room = tmp_path / "room.jsonl"
    files = [held_open(p) for p in (room, mark_path(room), tmp_path / "room.jsonl.nonces")]
    room_fd, mark_fd, nonces_fd = files

    async def main() -> None:
        watch = InotifyWatch(room)
        try:
            os.write(nonces_fd, b"nonce\n")
            os.write(room_fd, b"a line\n")
            assert not await watch.changed(0.5)
            os.write(mark_fd, b"mark")
            assert await watch.changed(5)
        finally:
            watch.close()

    try:
        asyncio.run(main())
    finally:
        for fd in files:
            os.close(fd)


def test_without_a_mark_the_rooms_writes_wake_it_and_a_new_mark_takes_over(
    tmp_path: Path,
) -> None:
    """A room with no mark beside it delivers every whole line, so its writes wake the watch;
    once a mark appears (its arrival wakes it too), only the mark's writes do."""
    room = tmp_path / "room.jsonl"
    room_fd = held_open(room)

    async def main() -> None:
        watch = InotifyWatch(room)
        try:
            os.write(room_fd, b"a line\n")
            assert await watch.changed(5)
            mark_fd = held_open(mark_path(room))
            try:
                assert await watch.changed(5)  # the mark appeared
                while await watch.changed(0.3):  # the old watch's removal may wake it once
                    pass
                os.write(room_fd, b"another line\n")
                assert not await watch.changed(0.5)
                os.write(mark_fd, b"mark")
                assert await watch.changed(5)
            finally:
                os.close(mark_fd)
        finally:
            watch.close()

    try:
        asyncio.run(main())
    finally:
        os.close(room_fd)

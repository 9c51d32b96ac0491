"""The hub's tree keeps up with the room whatever order lines reach it (room/tlog.py).

In-process with the real JSONL log: a tree attached late (lines it never
saw) catches up from the room when the next stored line shows the gap, and
a tree that cannot be written leaves the posts stored and answered.
"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from room.jsonl import JsonlLog
from room.log import Draft
from room.message import Post
from room.tlog import TransparencyLog
from room.tree import Tree
from tests.tlog import naive


def _draft(i: int) -> Draft:
    return Draft(
        Post.model_validate({"from": "visitor", "to": "@echo", "type": "chat", "body": f"p{i}"}),
        False,
    )


def test_a_late_tree_catches_up_from_the_room(tmp_path: Path) -> None:
    """Ten lines stored before the tree was attached are read back in when line 11 shows the gap."""

    async def run() -> int:
        room = tmp_path / "room.jsonl"
        log = JsonlLog(room)
        await log.open()
        for i in range(10):
            await log.append(_draft(i))
        tree = Tree(tmp_path / "room.jsonl.tlog")
        tlog = TransparencyLog(room, tree, log, Ed25519PrivateKey.generate(), "bullpen/test")
        log.on_stored = tlog.stored
        await log.append(_draft(10))
        await asyncio.wait_for(_until(lambda: tree.size == 11), 10)
        for i in range(11, 15):
            await log.append(_draft(i))
        signed = await tlog.sign()
        await log.close()
        lines = room.read_bytes().split(b"\n")[:-1]
        assert signed is not None and signed.head().root == naive.mth(lines)
        tree.close()
        return len(lines)

    assert asyncio.run(run()) == 15


def test_a_tree_that_cannot_be_written_does_not_fail_posts(tmp_path: Path) -> None:
    """A tree whose writes fail (a full disk): posts are still stored and answered."""

    async def run() -> tuple[int, str | None]:
        room = tmp_path / "room.jsonl"
        log = JsonlLog(room)
        await log.open()
        tree = FullTree(tmp_path / "room.jsonl.tlog")
        tlog = TransparencyLog(room, tree, log, Ed25519PrivateKey.generate(), "bullpen/test")
        log.on_stored = tlog.stored
        stored = [await log.append(_draft(i)) for i in range(2100)]  # past one flush
        await log.close()
        return stored[-1].seq, tlog.broken

    seq, broken = asyncio.run(run())
    assert seq == 2100 and broken is not None and "could not be written" in broken


class FullTree(Tree):
    """A tree on a full disk: every write of its nodes fails."""

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


async def _until(condition: object) -> None:
    while not condition():  # type: ignore[operator]
        await asyncio.sleep(0.01)

"""Recovery never forks the history: damage a crash cannot explain stops the hub, moving nothing.

A torn tail (the bytes of the last write, never acknowledged) is moved aside
(test_torn_tails.py, test_power_loss.py). Everything else — damage below the
hub's checkpoint or durable mark, or a damaged line with more good lines after
it than one write holds — must leave the room byte for byte as it was, exit 78
(restarting cannot help), and say where and what to do. The way out by hand
that the message gives is then run exactly as printed.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import httpx

from room.durable import mark_path
from room.jsonl import MAX_BATCH_BYTES, JsonlLog
from room.log import Draft
from room.message import Post
from room.tlog import note_path
from tests.support import Society
from trust.audit import audit_file


def post_lines(society: Society, count: int) -> None:
    with httpx.Client(base_url=society.strict_url, timeout=10) as client:
        for n in range(count):
            body = {"from": "w", "to": "@sink", "type": "chat", "body": f"line {n} " + "x" * 200}
            assert client.post("/say", json=body).status_code == 200


def damage_line(room: Path, seq: int) -> tuple[bytes, int]:
    """Zero 40 bytes in the middle of line `seq` (as a bad sector would); the image and its offset."""
    data = bytearray(room.read_bytes())
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]
    offset = starts[seq - 1]
    data[offset + 30 : offset + 70] = bytes(40)
    room.write_bytes(bytes(data))
    return bytes(data), offset


def refused(society: Society) -> str:
    hub = society.spawn("hub-refused", "hub")
    code = hub.proc.wait(30)
    society.procs.remove(hub)
    assert code == 78, hub.output()
    return hub.output()


def test_damage_150_lines_below_the_checkpoint_stops_the_hub(society: Society) -> None:
    """A line damaged 150 lines from the end, below the checkpoint: exit 78, the room
    byte-identical, the seq named; the printed command then moves the tail aside."""
    hub = society.start_hub()
    post_lines(society, 200)
    assert hub.stop() == 0
    society.procs.remove(hub)
    image, offset = damage_line(society.room, 51)
    said = refused(society)
    assert society.room.read_bytes() == image
    assert not list(society.room.parent.glob("room.jsonl.torn-*"))
    assert "damaged at seq 51" in said and f"byte offset {offset}" in said, said
    assert "followed by 149 whole lines" in said and "bullpen audit" in said
    # The way out by hand, exactly as printed: seq 51 on is given up, the hub starts.
    command = re.search(r"with the hub stopped: `([^`]+)`", said)
    assert command is not None, said
    subprocess.run(["bash", "-c", command.group(1)], check=True)
    assert society.room.read_bytes() == image[:offset]
    society.start_hub()
    with httpx.Client(base_url=society.strict_url, timeout=10) as client:
        body = {"from": "w", "to": "@sink", "type": "chat", "body": "after"}
        assert client.post("/say", json=body).json()["seq"] == 51
    assert audit_file(society.room).ok
    aside = society.room.with_name(f"room.jsonl.damaged-from-{offset}")
    assert aside.read_bytes() == image[offset:]


def test_damage_below_the_durable_mark_alone_stops_the_hub(society: Society) -> None:
    """Without a checkpoint, the durable mark alone makes a damaged line below it a refusal."""
    hub = society.start_hub()
    post_lines(society, 20)
    hub.kill()  # no checkpoint at shutdown
    society.procs.remove(hub)
    # the hub signs soon after the room grows: take its checkpoints away, the mark stays
    society.room.with_name("room.jsonl.checkpoint").unlink()
    note_path(society.room).unlink()
    image, _ = damage_line(society.room, 18)
    said = refused(society)
    assert society.room.read_bytes() == image
    assert "damaged at seq 18" in said and "durable mark" in said, said


def test_a_hole_larger_than_one_write_stops_the_hub(society: Society, tmp_path: Path) -> None:
    """With no checkpoint and no mark, a damaged line followed by more than one write of good
    lines is still a refusal: a crash damages only the last write."""

    async def fill() -> None:
        log = JsonlLog(society.room)
        await log.open()
        post = Post.model_validate({"from": "w", "to": "@sink", "type": "chat", "body": "y" * 9000})
        for _ in range(150):
            await log.append(Draft(post, verified=False))
        await log.close()

    asyncio.run(fill())
    mark_path(society.room).unlink()
    image, offset = damage_line(society.room, 20)
    assert len(image) - offset > MAX_BATCH_BYTES
    said = refused(society)
    assert society.room.read_bytes() == image
    assert "damaged at seq 20" in said and "followed by 130 whole lines" in said, said
    assert "between two fsyncs" in said

"""Suite 4: a room whose end was torn: cut at every byte, or followed by garbage.

A room written and synced by the real log is cut at every byte offset of
its last three lines, with and without random garbage after the cut; the
real recovery (JsonlLog.open) must keep exactly the whole lines before the
cut, move every byte after them to a side file, and leave a room that
chains and takes new posts. A few cuts are also recovered by a real hub
process, which must report what it moved: cuts in lines the hub had not yet
recorded as durable (its checkpoint and durable mark name an earlier line),
as after a power loss; below those records a cut is refused
(tests/reliability/test_recovery_refusals.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from room.durable import mark_path
from room.jsonl import JsonlLog
from room.log import Draft
from room.message import Post
from tests.reliability.helpers import Seeded, figures
from tests.support import HTTP, Society
from trust.audit import audit_file

BODIES = ["plain", "é日本\u2028\u0085", "x" * 150, '"quoted" \\ back', "", "tab\there\nnewline"]


def write_room(path: Path, lines: int) -> bytes:
    async def main() -> None:
        log = JsonlLog(path)
        await log.open()
        for n in range(lines):
            body = BODIES[n % len(BODIES)]
            post = Post.model_validate(
                {"from": "w", "to": "@sink", "type": "chat", "body": body, "data": {"n": n}}
            )
            await log.append(Draft(post, verified=n % 2 == 0))
        await log.close()

    asyncio.run(main())
    return path.read_bytes()


def garbage(rng: Seeded) -> bytes:
    """Bytes a torn write or a stray writer might leave: random, zeros, or JSON-looking junk."""
    return rng.choice(
        [
            rng.randbytes(rng.randint(1, 600)),
            bytes(rng.randint(1, 600)),
            b'{"seq":',
            b'{"half": \n{"seq": 99, "x"\n',
            b"\n\n\n",
            b'not json\n{"a":1}\n',
        ]
    )


def expected_end(full: bytes, ends: list[int], image: bytes) -> int:
    """Where the recovered room must end: after the last whole original line the image still holds.

    Usually the last line end before the cut; but garbage starting with a newline,
    right after a cut that took only a line's newline, gives that line back whole.
    """
    return max(end for end in [0, *ends] if end <= len(image) and image[:end] == full[:end])


async def recover(path: Path) -> tuple[bytes, int]:
    log = JsonlLog(path)
    report = await log.open()
    await log.close()
    return path.read_bytes(), report.head.seq


@pytest.mark.soak
def test_cut_at_every_byte_of_the_last_three_lines(tmp_path: Path, soak: bool, rng: Seeded) -> None:
    """Every cut keeps exactly the whole lines before it and moves the rest aside, garbage or not."""
    full = write_room(tmp_path / "source.jsonl", 12)
    ends = [i + 1 for i, byte in enumerate(full) if byte == 0x0A]
    first = ends[-4]  # the start of the third line from the end
    variants = 4 if soak else 1
    work = tmp_path / "work"
    cases = 0
    started = time.monotonic()

    async def main() -> None:
        nonlocal cases
        for cut in range(first, len(full) + 1):
            for variant in range(1 + variants):
                tail = b"" if variant == 0 else garbage(rng)
                image = full[:cut] + tail
                if image == full:
                    continue
                if work.exists():
                    for old in work.iterdir():
                        old.unlink()
                else:
                    work.mkdir()
                room = work / "room.jsonl"
                room.write_bytes(image)
                kept = expected_end(full, ends, image)
                recovered, head = await recover(room)
                where = f"cut at {cut}, garbage {tail[:20]!r} (seed {rng.seed_value})"
                assert recovered == full[:kept], f"kept the wrong bytes: {where}"
                assert head == ends.index(kept) + 1 if kept else head == 0, where
                sides = list(work.glob("room.jsonl.torn-*"))
                if image[kept:]:
                    assert len(sides) == 1 and sides[0].read_bytes() == image[kept:], where
                else:
                    assert not sides, where
                assert audit_file(room).ok, where
                cases += 1

    asyncio.run(main())
    assert cases >= len(full) - first
    figures(
        "torn tails",
        cuts=len(full) + 1 - first,
        cases=cases,
        seconds=round(time.monotonic() - started, 1),
    )


def test_the_hub_recovers_a_torn_room_and_says_so(society: Society, rng: Seeded) -> None:
    """A real hub started on a torn room moves the tail aside, reports it, and goes on from the last whole line."""
    hub = society.start_hub()

    def say(n: int) -> None:
        answer = HTTP.post(
            f"{society.strict_url}/say",
            json={"from": "w", "to": "@sink", "type": "chat", "body": f"line {n} é\u2028"},
            timeout=10,
        )
        assert answer.status_code == 200

    for n in range(7):
        say(n)
    assert hub.stop() == 0
    # What the hub knew had reached the disk when the power failed: lines 1-7.
    records = [society.room.with_name("room.jsonl.checkpoint"), mark_path(society.room)]
    # The Merkle tree and its signed note (room/tlog.py) are durable records too: as they were.
    tree_dir = society.room.with_name("room.jsonl.tlog")
    records += sorted(p for p in tree_dir.rglob("*") if p.is_file())
    known = [p.read_bytes() for p in records]
    hub = society.start_hub()
    for n in range(7, 10):
        say(n)
    assert hub.stop() == 0
    full = society.room.read_bytes()
    ends = [i + 1 for i, byte in enumerate(full) if byte == 0x0A]
    log = society.root / "test-logs" / "hub.log"
    for attempt in range(5):
        cut = rng.choice([c for c in range(ends[-4], len(full)) if c not in ends])  # mid-line
        tail = garbage(rng) if attempt % 2 else b""
        society.room.write_bytes(full[:cut] + tail)
        for extra in (p for p in tree_dir.rglob("*") if p.is_file() and p not in records):
            extra.unlink()  # written after the power failed, in this telling
        for path, raw in zip(records, known, strict=True):
            path.write_bytes(raw)
        kept = expected_end(full, ends, full[:cut] + tail)
        for side in society.room.parent.glob("room.jsonl.torn-*"):
            side.unlink()
        logged = len(log.read_bytes())
        hub = society.start_hub()
        said = log.read_bytes()[logged:].decode(errors="replace")
        assert society.room.read_bytes() == full[:kept]
        moved = (full[:cut] + tail)[kept:]
        sides = list(society.room.parent.glob("room.jsonl.torn-*"))
        assert [p.read_bytes() for p in sides] == ([moved] if moved else [])
        assert not moved or (sides[0].name in said and "moved" in said)
        answer = HTTP.post(
            f"{society.strict_url}/say",
            json={"from": "w", "to": "@sink", "type": "chat", "body": "after"},
            timeout=10,
        )
        assert answer.json()["seq"] == ends.index(kept) + 2
        assert hub.stop() == 0
        assert audit_file(society.room).ok
        society.room.write_bytes(full)
    assert json.loads(full.split(b"\n")[-2])["seq"] == 10

"""Filtered reads of lines that left the cache: a scan of the file that jumps between lines
holding the filter's first needle (RoomFile.lines_containing), then checks the rest in full."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from room.jsonl import JsonlLog
from room.log import Draft, Filter
from room.message import Post


def draft(n: int) -> Draft:
    """Line n: to @a or @b, from w1 or w2, thread t on every third, and decoys in data that
    carry the needles of the other fields."""
    fields = {
        "from": "w2" if n % 2 else "w1",
        "to": "@a" if n % 3 == 0 else "@b",
        "type": "chat",
        "body": f"line {n}",
        "thread": "t" if n % 3 == 1 else None,
        "data": {"to": "@a", "from": "w2", "thread": "t"} if n % 4 == 0 else None,
    }
    return Draft(Post.model_validate(fields), verified=False)


def test_filtered_reads_from_the_file_match_only_the_fields(tmp_path: Path) -> None:
    async def run() -> dict[str, list[int]]:
        room = tmp_path / "room.jsonl"
        log = JsonlLog(room, cache_lines=16)
        await log.open()
        for n in range(300):  # all but the last 16 leave the cache
            await log.append(draft(n))
        reads = {
            "to": await log.read(0, 1000, Filter(to="@a")),
            "to and from": await log.read(0, 1000, Filter(to="@a", sender="w2")),
            "from, limited": await log.read(10, 5, Filter(sender="w2")),
            "thread and from": await log.read(0, 1000, Filter(thread="t", sender="w2")),
            "thread and to": await log.read(0, 1000, Filter(thread="t", to="@a")),
        }
        await log.close()
        return {name: [json.loads(raw)["seq"] for raw in r.lines] for name, r in reads.items()}

    got = asyncio.run(run())
    seq = range(1, 301)  # line n is seq n + 1
    assert got["to"] == [s for s in seq if (s - 1) % 3 == 0]
    assert got["to and from"] == [s for s in seq if (s - 1) % 3 == 0 and (s - 1) % 2]
    assert got["from, limited"] == [s for s in seq if s > 10 and (s - 1) % 2][:5]
    assert got["thread and from"] == [s for s in seq if (s - 1) % 3 == 1 and (s - 1) % 2]
    assert got["thread and to"] == []  # no line of t is to @a, whatever its data says

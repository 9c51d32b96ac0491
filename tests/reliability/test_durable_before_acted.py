"""Durable before acted on: nothing acts on a line, or forgets a proof, that a power loss can take back.

A real hub whose fsync is held up (BULLPEN_FAULTS=delay@fsync) has written a
line it has not made durable: a lurker tailing the file must not act on it
and /read must not serve it, until the fsync is done; then both do at once.
The nonce journal must reach the disk before the room line whose proof it
records: power-loss points over the real log and nonce store check it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from room import durable
from room.chain import line_hash
from room.jsonl import JsonlLog
from room.log import Draft
from room.message import Post
from room.tail import FileFollower, Position
from tests.reliability.helpers import Seeded, figures
from tests.reliability.powerloss import MODES, PowerCut, PowerLossIO, disk_after_crash
from tests.support import HTTP, Society, add_nick
from trust.nonces import NonceStore
from trust.proof import SecretSigner

DELAY_MS = 2000


def until(condition: Callable[[], Any], timeout: float, what: str) -> float:
    """Poll `condition` every 2 ms (for a timestamp, not a back-off); the time it held."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.002)
    return time.monotonic()


def test_a_lurker_acts_only_once_the_line_is_fsynced(society: Society, tmp_path: Path) -> None:
    """With the hub's fsync held up 2 s, the line is in the file but no lurker acts on it and
    /read does not serve it; once the fsync is done the lurker acts at once."""
    count = tmp_path / "handled"
    add_nick(society.root, "worker", handler="tests.tools.steps:counted")
    # fsync 1 is recovery's at start-up; fsync 2 is the first batch: the post below.
    society.start_hub(env={"BULLPEN_FAULTS": f"delay@fsync:2:{DELAY_MS}"})
    # The full lurker from the start (agents/runtime/lean.py): this times the wake against
    # the fsync, not a lean lurker's first wake, which also loads the full lurker.
    society.start_lurker(
        "worker", env={"BULLPEN_TEST_COUNT_FILE": str(count), "BULLPEN_LEAN": "off"}
    )
    assert society.lines() == [], "something was posted before the held one"
    acked: dict[str, Any] = {}

    def post() -> None:
        body = {"from": "operator", "to": "@worker", "type": "ask", "body": "do it"}
        body.update(SecretSigner(society.secret()).prove(Post.model_validate(body)))
        answer = HTTP.post(f"{society.strict_url}/say", json=body, timeout=30)
        acked["line"] = answer.json()
        acked["at"] = time.monotonic()

    poster = threading.Thread(target=post)
    poster.start()
    try:
        written = until(lambda: society.room.stat().st_size > 0, 10, "the line to be written")
        read = HTTP.get(
            f"{society.strict_url}/read",
            params={"after": 0},
            headers=society.read_headers(),
            timeout=10,
        ).json()
        assert read["messages"] == [] and read["last_seq"] == 0, read
        mark = durable.load(society.room)
        assert mark is not None and mark.seq == 0, mark
        # An observation window, far longer than a wake takes (milliseconds), still inside
        # the held fsync: had the lurker acted on the written line, it would show here.
        with contextlib.suppress(AssertionError):
            until(lambda: count.exists(), 1.0, "the lurker (it must not act yet)")
        assert not count.exists(), "the lurker acted on a line that was not yet durable"
        assert "at" not in acked, "the observation window outlasted the held fsync"
    finally:
        poster.join(30)
    acted = until(lambda: count.exists() and count.read_text().strip(), 10, "the lurker to act")
    assert count.read_text().split() == [acked["line"]["id"]]
    assert acted - written >= DELAY_MS / 1000 * 0.9, "it acted before the fsync was done"
    assert acted - acked["at"] < 1.0, "it did not act right after the fsync"
    read = HTTP.get(
        f"{society.strict_url}/read",
        params={"after": 0},
        headers=society.read_headers(),
        timeout=10,
    ).json()
    assert read["messages"][0]["id"] == acked["line"]["id"]


def test_a_file_follower_delivers_only_what_the_mark_covers(tmp_path: Path) -> None:
    """A follower sees a written line only when the durable mark beside the room reaches it."""
    room = tmp_path / "room.jsonl"

    async def main() -> None:
        log = JsonlLog(room)
        await log.open()
        post = Post.model_validate({"from": "w", "to": "@sink", "type": "chat", "body": "one"})
        first = await log.append(Draft(post, False))
        second = await log.append(Draft(post, False))
        await log.close()
        data = room.read_bytes()
        end_first = data.index(b"\n") + 1
        writer = durable.MarkWriter(room)  # as a hub whose second fsync is still running
        writer.publish(durable.Mark(1, end_first, line_hash(first.raw)))
        follower = FileFollower(room, Position(0, 0), safety_s=30)
        seen: list[int] = []

        async def consume() -> None:
            async for message, _ in follower.follow():
                seen.append(message.seq)

        task = asyncio.create_task(consume())
        try:
            for _ in range(500):
                if seen:
                    break
                await asyncio.sleep(0.002)
            await asyncio.sleep(0.2)  # a window in which seq 2 would have been delivered
            assert seen == [first.seq], seen
            writer.publish(durable.Mark(2, len(data), line_hash(second.raw)))  # fsync returned
            for _ in range(2500):
                if len(seen) == 2:
                    break
                await asyncio.sleep(0.002)
            assert seen == [first.seq, second.seq], seen
        finally:
            follower.stop()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            writer.close()

    asyncio.run(main())


async def _one_power_loss(work: Path, rng: Seeded) -> int:
    """Posts whose nonces are reserved first (as the gate does), a power failure, recovery:
    every recovered room line's nonce must be in the recovered journal. Lines checked."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    room, journal = work / "room.jsonl", work / "room.jsonl.nonces"
    nonces = NonceStore(journal)
    nonces.open()
    io = PowerLossIO(rng.randint(1, 12), rng)
    synced = [journal.stat().st_size]  # what of the journal a power loss keeps

    def flush() -> None:
        time.sleep(0.003)  # the journal's sync is the slower one
        size = journal.stat().st_size
        nonces.flush()
        if not io.crashed:
            synced[0] = size

    log = JsonlLog(room, before_sync=[flush], io=io)
    try:
        await log.open()
    except PowerCut:
        nonces.close()
        return 0
    tasks = []
    for n in range(rng.randint(1, 12)):
        nonce = f"{n}-{rng.random():.12f}"
        assert nonces.reserve(nonce, int(time.time()))
        post = Post.model_validate(
            {"from": "w", "to": "@sink", "type": "chat", "body": "p", "data": {"nonce": nonce}}
        )
        tasks.append(asyncio.create_task(log.append(Draft(post, True))))
        for _ in range(rng.choice((0, 1, 3))):
            await asyncio.sleep(0)
    await asyncio.gather(*tasks, return_exceptions=True)
    if io.crashed:
        log._release()  # the process is gone
    else:
        await log.close()
        io.durable = room.stat().st_size
    nonces.close()
    room.write_bytes(disk_after_crash(room.read_bytes(), io.durable, rng.choice(MODES), rng))
    journal.write_bytes(journal.read_bytes()[: synced[0]])  # unsynced journal bytes: lost
    again = NonceStore(journal)
    again.open()
    log = JsonlLog(room)
    await log.open()
    await log.close()
    lines = [json.loads(raw) for raw in room.read_bytes().split(b"\n")[:-1]]
    for line in lines:
        nonce = line["data"]["nonce"]
        assert not again.reserve(nonce, int(time.time())), (
            f"seq with nonce {nonce} survived the power loss but its nonce did not: the proof "
            f"could be replayed (seed {rng.seed_value})"
        )
    again.close()
    return len(lines)


def test_no_proof_outlives_its_nonce_across_a_power_loss(tmp_path: Path, rng: Seeded) -> None:
    """At every simulated power failure, each room line on disk has its nonce on disk too."""
    checked = 0
    started = time.monotonic()

    async def main() -> None:
        nonlocal checked
        for _ in range(120):
            checked += await _one_power_loss(tmp_path / "work", rng)

    asyncio.run(main())
    assert checked > 100, "too few lines survived to prove anything"
    figures(
        "nonce journal before room",
        lines_checked=checked,
        seconds=round(time.monotonic() - started, 1),
    )

"""Durable before acted on: nothing acts on a line, or forgets a proof, that a power loss can take back.

A real hub whose fsync is held up (BULLPEN_FAULTS=delay@fsync) has written a
line it has not made durable: a lurker tailing the file must not act on it
and /read must not serve it, until the fsync is done; then both do at once.
A proof's nonce rides in its own line, so no line can reach the disk without
it: power-loss points over the real log, and the nonce store rebuilt from what
each left on disk, check it.
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
    """Posts whose nonces are reserved first (as the gate does) and kept in their lines (as the
    hub does), a power failure, recovery: every recovered line's nonce must be refused by the
    nonce store the next hub rebuilds from the room. Lines checked."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    room = work / "room.jsonl"
    nonces = NonceStore(None)
    nonces.open(room)
    io = PowerLossIO(rng.randint(1, 12), rng)
    log = JsonlLog(room, io=io)
    try:
        await log.open()
    except PowerCut:
        return 0
    tasks = []
    for n in range(rng.randint(1, 12)):
        nonce = f"n{n}-{rng.randrange(1 << 60):x}"
        assert nonces.reserve(nonce, int(time.time()))
        post = Post.model_validate({"from": "w", "to": "@sink", "type": "chat", "body": "p"})
        tasks.append(asyncio.create_task(log.append(Draft(post, True, nonce=nonce))))
        for _ in range(rng.choice((0, 1, 3))):
            await asyncio.sleep(0)
    await asyncio.gather(*tasks, return_exceptions=True)
    if io.crashed:
        log._release()  # the process is gone
    else:
        await log.close()
        io.durable = room.stat().st_size
    room.write_bytes(disk_after_crash(room.read_bytes(), io.durable, rng.choice(MODES), rng))
    log = JsonlLog(room)
    await log.open()  # recovery: a torn tail moved aside
    await log.close()
    again = NonceStore(None)
    again.open(room)
    lines = [json.loads(raw) for raw in room.read_bytes().split(b"\n")[:-1]]
    for line in lines:
        nonce = line["nonce"]
        assert not again.reserve(nonce, int(time.time())), (
            f"seq {line['seq']} with nonce {nonce} survived the power loss but the rebuilt "
            f"store took its nonce again: the proof could be replayed (seed {rng.seed_value})"
        )
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
        "nonce in its line, rebuilt after power loss",
        lines_checked=checked,
        seconds=round(time.monotonic() - started, 1),
    )


def test_the_nonce_store_is_rebuilt_from_the_rooms_recent_lines(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Both kinds of nonce (a secret proof's `nonce`, a key's `sig.nonce`) of the lines of the
    last two windows come back from the room, read from the tail in blocks smaller than a
    line; an older line's nonce is not kept (its proof is refused by its timestamp)."""
    import trust.nonces
    from room.ids import IdClock
    from room.log import build_line
    from room.message import Signature

    monkeypatch.setattr(trust.nonces, "CHUNK", 97)  # lines span blocks
    now = int(time.time())
    clock, prev, raws = IdClock(), "0" * 64, []
    stamped = [now - 1000, now - 300, now - 200, now - 5, now]  # the window is 120 s
    for seq, when in enumerate(stamped, 1):
        sig = Signature(ts=when, nonce=f"key-nonce-{seq}", value="AAAA") if seq % 2 else None
        post = Post.model_validate(
            {"from": "w", "to": "@sink", "type": "chat", "body": "x" * 150, "sig": sig}
        )
        ulid, ms = clock.next(when * 1000)
        raw = build_line(seq, ulid, ms, Draft(post, True, nonce=f"secret-nonce-{seq}"), prev)
        raws.append(raw)
        prev = line_hash(raw)
    room = tmp_path / "room.jsonl"
    room.write_bytes(b"".join(raw + b"\n" for raw in raws))
    found = dict(trust.nonces.room_nonces(room, now - 240))
    assert found == {
        "secret-nonce-3": now - 200,
        "key-nonce-3": now - 200,
        "secret-nonce-4": now - 5,
        "secret-nonce-5": now,
        "key-nonce-5": now,
    }
    store = NonceStore(None)
    store.open(room)
    assert not store.reserve("secret-nonce-4", now) and not store.reserve("key-nonce-5", now)
    assert store.reserve("secret-nonce-1", now)  # older than two windows: not remembered

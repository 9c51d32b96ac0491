"""Suite 3: simulated power loss at random points of a working log.

Each crash point runs the real JsonlLog over PowerLossIO (powerloss.py) with
concurrent appends, fails the power at one chosen write or fsync, builds a
disk image the crash could leave (unsynced bytes kept, dropped, cut or
damaged per sector), and runs the real recovery (JsonlLog.open) on it. The
recovered room must be a prefix of what the hub wrote that keeps every
fsynced byte and every acknowledged post, chains, and moves the remainder
aside. Half the points start from a room already larger than the tail that
recovery checks. CI runs 1,000 points; `pytest --soak` 20,000.

A crash point is an operation the workload really makes: each point first runs
its workload with the power on to count its writes and fsyncs, then replays it
(the same drafts and scheduling choices) and fails the power at one of them,
chosen uniformly. The writer syncs on a thread, so a replay can make fewer
operations than the count; such a draw did not lose power, is not counted as a
point, and is drawn again. Every counted point asserts that the power failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from room.jsonl import JsonlLog
from room.log import Draft, Stored
from room.message import Post
from tests.reliability.helpers import Seeded, figures
from tests.reliability.powerloss import MODES, PowerCut, PowerLossIO, disk_after_crash
from trust.audit import audit_file

pytestmark = pytest.mark.long  # one of the suite's slowest: run first (tests/conftest.py)

ALPHABET = 'abc xyz é ü 日本 \u2028 \u0085 \x1c " \\ \n\t'
TEXT = "".join(Seeded(7).choice(ALPHABET) for _ in range(30000))  # bodies are slices of it


def draft(rng: Seeded, n: int) -> Draft:
    size = rng.choice((0, 10, 40, 200)) if rng.random() < 0.8 else rng.choice((700, 3000, 20000))
    start = rng.randrange(len(TEXT) - size)
    body = TEXT[start : start + size]
    post = Post.model_validate(
        {"from": "w", "to": "@sink", "type": "chat", "body": body, "data": {"n": n}}
    )
    return Draft(post, verified=rng.random() < 0.5)


async def fill(room: Path, lines: int) -> None:
    log = JsonlLog(room)
    await log.open()
    post = Post.model_validate({"from": "w", "to": "@sink", "type": "chat", "body": "x" * 60000})
    for _ in range(lines // 10):
        await asyncio.gather(*(log.append(Draft(post, False)) for _ in range(10)))
    await log.close()


async def run_until_power_fails(
    room: Path, rng: Seeded, crash_at: int, drafts: list[Draft] | None = None
) -> tuple[list[Stored], PowerLossIO]:
    """Open the log and append concurrently until the power fails; return what was acknowledged."""
    io = PowerLossIO(crash_at, rng)
    io.durable = room.stat().st_size if room.exists() else 0  # what is there is on disk
    log = JsonlLog(room, io=io)
    try:
        await log.open()
    except PowerCut:
        return [], io  # the power failed while the log was recovering
    burst = drafts is not None  # all at once: the writer finds them queued together
    if drafts is None:
        drafts = [draft(rng, n) for n in range(rng.randint(1, 40))]
    tasks = []
    for item in drafts:
        tasks.append(asyncio.create_task(log.append(item)))
        for _ in range(0 if burst else rng.choice((0, 0, 1, 3))):
            await asyncio.sleep(0)  # let some batches form and go out in between
    writer = log._writer_task
    assert writer is not None
    everything = asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.wait([everything, writer], return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()
    await asyncio.gather(everything, return_exceptions=True)
    acked = [t.result() for t in tasks if not t.cancelled() and t.exception() is None]
    if io.crashed:
        with contextlib.suppress(PowerCut):
            await writer
        log._release()  # the process is gone: nothing more reaches the file
    else:
        await log.close()
        io.durable = room.stat().st_size
    return acked, io


MAX_DRAWS = 20  # a replay that keeps making fewer operations than its count is a bug


def fresh(work: Path, big: Path | None) -> Path:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    room = work / "room.jsonl"
    if big is not None:
        shutil.copyfile(big, room)
    return room


async def lose_power(
    work: Path, rng: Seeded, big: Path | None, drafts: list[Draft] | None = None
) -> tuple[Path, list[Stored], PowerLossIO, int, int]:
    """Run the workload once with the power on to count its operations, then replay it and
    fail the power at one of them, uniformly; (room, acked, io, crash_at, draws)."""
    chooser = Seeded(rng.getrandbits(32))  # draws crash points without changing the workload
    state = rng.getstate()
    room = fresh(work, big)
    _, counted = await run_until_power_fails(room, rng, None, drafts)
    assert not counted.crashed and counted.ops > 0
    # How the writer batches depends on its thread's timing, so a replay may make fewer
    # operations than the counted run: a point past a replay's last operation is drawn again
    # among the operations that replay did make (it never counts: it did not crash).
    limit = counted.ops
    for draw in range(1, MAX_DRAWS + 1):
        rng.setstate(state)
        room = fresh(work, big)
        crash_at = chooser.randint(1, limit)
        acked, io = await run_until_power_fails(room, rng, crash_at, drafts)
        if io.crashed:
            return room, acked, io, crash_at, draw
        limit = max(1, min(limit, io.ops))
    raise AssertionError(
        f"{MAX_DRAWS} replays never reached their crash point (seed {rng.seed_value})"
    )


async def one_crash(work: Path, rng: Seeded, big: Path | None) -> dict[str, int | str]:
    """Run one workload to one power failure, recover, and check what recovery kept."""
    room, acked, io, crash_at, draws = await lose_power(work, rng, big)
    assert io.crashed  # every counted point lost power
    written = room.read_bytes()
    mode = rng.choice(MODES)
    image = disk_after_crash(written, io.durable, mode, rng)
    room.write_bytes(image)
    where = f"seed {rng.seed_value}, crash at op {crash_at}, mode {mode}, durable {io.durable}"

    log = JsonlLog(room)
    report = await log.open()
    recovered = room.read_bytes()
    assert recovered == written[: len(recovered)], f"recovery kept bytes never written ({where})"
    assert len(recovered) >= io.durable, f"recovery dropped fsynced bytes ({where})"
    assert not recovered or recovered.endswith(b"\n")
    lines = recovered.split(b"\n")[:-1]
    for stored in acked:
        assert stored.seq <= len(lines) and lines[stored.seq - 1] == stored.raw, (
            f"acknowledged seq {stored.seq} lost ({where})"
        )
    sides = sorted(work.glob("room.jsonl.torn-*"))
    assert recovered + b"".join(p.read_bytes() for p in sides) == image, (
        f"bytes after the recovered room were not all moved aside ({where})"
    )
    assert report.head.seq == len(lines)
    post = Post.model_validate({"from": "w", "to": "@sink", "type": "chat", "body": "after"})
    stored = await log.append(Draft(post, False))
    assert stored.seq == len(lines) + 1
    await log.close()
    audit = audit_file(room)
    assert audit.ok, f"{audit.summary()} ({where})"
    return {
        "mode": mode,
        "acked": len(acked),
        "moved": len(image) - len(recovered),
        "unsynced": int(len(written) > io.durable),
        "differed": int(image != written),
        "redraws": draws - 1,
    }


@pytest.mark.soak
def test_power_loss_keeps_every_acknowledged_post(
    memory_tmp: Path, soak: bool, rng: Seeded
) -> None:
    """At every simulated crash point the recovered room is a valid prefix holding every acknowledged post."""
    points = 20000 if soak else 1000
    tmp_path = memory_tmp  # PowerLossIO models the disk: its real fsyncs only cost time
    big = tmp_path / "big.jsonl"
    asyncio.run(fill(big, 40))  # ~2.4 MB: larger than the tail recovery re-checks
    assert big.stat().st_size > 2 * 1024 * 1024
    started = time.monotonic()
    modes: Counter[str] = Counter()
    counts: Counter[str] = Counter()

    async def main() -> None:
        for _ in range(points):
            seen = await one_crash(tmp_path / "work", rng, big if rng.random() < 0.5 else None)
            modes[str(seen["mode"])] += 1
            counts["acked"] += int(seen["acked"])
            counts["moved"] += int(seen["moved"]) > 0
            for key in ("unsynced", "differed", "redraws"):
                counts[key] += int(seen[key])

    asyncio.run(main())
    assert counts["unsynced"] > points // 4  # the points reach unsynced data, not only syncs
    figures(
        "power_loss",
        crash_points_that_lost_power=points,
        with_unsynced_bytes=counts["unsynced"],
        disk_image_differed=counts["differed"],
        draws_that_did_not_reach_their_point=counts["redraws"],
        modes=dict(modes),
        acknowledged_posts_checked=counts["acked"],
        recoveries_that_moved_a_tail_aside=counts["moved"],
        seconds=round(time.monotonic() - started, 1),
    )


def big_draft(n: int) -> Draft:
    """A post near the size limits: a ~250 KB data object."""
    post = Post.model_validate(
        {
            "from": "w",
            "to": "@sink",
            "type": "chat",
            "body": "big",
            "data": {"n": n, "pad": "y" * 250_000},
        }
    )
    return Draft(post, verified=False)


class RecordingIO(PowerLossIO):
    """Never crashes; remembers the size of every write."""

    def __init__(self, rng: Seeded) -> None:
        super().__init__(None, rng)
        self.writes: list[int] = []

    def write(self, fd: int, data: bytes) -> int:
        self.writes.append(len(data))
        return super().write(fd, data)


def test_a_burst_of_big_posts_goes_out_in_bounded_writes(tmp_path: Path, rng: Seeded) -> None:
    """Group commit never makes one unsynced write larger than the tail recovery re-checks."""
    from room.jsonl import MAX_BATCH_BYTES

    async def main() -> list[int]:
        io = RecordingIO(rng)
        log = JsonlLog(tmp_path / "room.jsonl", io=io)
        await log.open()
        stored = await asyncio.gather(*(log.append(big_draft(n)) for n in range(24)))
        await log.close()
        assert [s.seq for s in stored] == list(range(1, 25))
        return io.writes

    writes = asyncio.run(main())
    assert sum(writes) == (tmp_path / "room.jsonl").stat().st_size
    assert max(writes) <= MAX_BATCH_BYTES, writes
    assert audit_file(tmp_path / "room.jsonl").ok


@pytest.mark.soak
def test_power_loss_during_a_burst_of_big_posts(memory_tmp: Path, soak: bool, rng: Seeded) -> None:
    """A burst of near-limit posts cut by a power failure still recovers to a valid prefix."""
    points = 1500 if soak else 150
    tmp_path = memory_tmp  # PowerLossIO models the disk: its real fsyncs only cost time
    unsynced = 0

    async def main() -> None:
        nonlocal unsynced
        for point in range(points):
            drafts = [big_draft(n) for n in range(16)]
            room, acked, io, _, _ = await lose_power(tmp_path / "work", rng, None, drafts)
            assert io.crashed
            written = room.read_bytes()
            unsynced += len(written) > io.durable
            room.write_bytes(
                disk_after_crash(written, io.durable, "sectors", rng, rng.choice((0.001, 0.004)))
            )
            where = f"seed {rng.seed_value}, point {point}"
            log = JsonlLog(room)
            await log.open()
            await log.close()
            recovered = room.read_bytes()
            assert recovered == written[: len(recovered)], where
            assert len(recovered) >= io.durable, where
            lines = recovered.split(b"\n")[:-1]
            assert all(lines[s.seq - 1] == s.raw for s in acked), where
            assert audit_file(room).ok, where

    asyncio.run(main())
    figures("power_loss_bursts", crash_points_that_lost_power=points, with_unsynced_bytes=unsynced)


@pytest.mark.soak
def test_what_recovery_serves_survives_a_power_loss(
    memory_tmp: Path, soak: bool, rng: Seeded
) -> None:
    """Lines a restarted hub recovered and serves as its head are durable before it serves them."""
    points = 2000 if soak else 200
    tmp_path = memory_tmp  # PowerLossIO models the disk: its real fsyncs only cost time

    async def main() -> None:
        for point in range(points):
            work = tmp_path / "work"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            room = work / "room.jsonl"
            # The hub process dies (SIGKILL): unsynced writes stay in the page cache.
            _, first = await run_until_power_fails(room, rng, rng.randint(1, 30))
            durable = first.durable
            # It restarts: recovery takes the page cache's lines as the head and serves them.
            again = PowerLossIO(None, rng)
            again.durable = durable
            log = JsonlLog(room, io=again)
            report = await log.open()
            served = report.head.seq
            log._release()
            # The power fails before any new post arrives.
            room.write_bytes(
                disk_after_crash(room.read_bytes(), again.durable, rng.choice(MODES[1:]), rng)
            )
            log = JsonlLog(room)
            after = await log.open()
            await log.close()
            assert after.head.seq >= served, (
                f"the hub served seq {served}, then a power loss took it back to {after.head.seq} "
                f"(seed {rng.seed_value}, point {point})"
            )

    asyncio.run(main())

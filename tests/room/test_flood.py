"""The hub under a local flood: slow connections cut, answers bounded, strangers rate-limited,
scans of unknown threads off the writer's path. bench/flood.py measures the full sizes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bench.flood import big_room, old_thread, rss_mib, unread
from tests.support import HTTP, REPO, Society, run_cli, set_hub, wait_for

FLOODER = str(REPO / "bench" / "flood_client.py")


def stranger(society: Society, nick: str = "stranger", body: str = "hi") -> httpx.Response:
    return HTTP.post(
        f"{society.strict_url}/say",
        json={"from": nick, "to": "@sink", "type": "chat", "body": body},
        timeout=30,
    )


def operator_say(society: Society, body: str) -> tuple[float, dict]:
    started = time.monotonic()
    done = run_cli(society.root, "say", "@everyone", body, timeout=120)
    assert done.returncode == 0, done.stderr
    return time.monotonic() - started, json.loads(done.stdout)


def health(society: Society) -> dict:
    return HTTP.get(f"{society.strict_url}/health", timeout=30).json()


def test_half_open_and_trickling_connections_are_cut_and_the_operator_gets_in(
    society: Society,
) -> None:
    """500 idle/half-open connections and 20 tricklers against a bound of 200: all are cut, `say` lands."""
    set_hub(society.root, head_timeout_s=1.0, max_connections=200)
    hub = society.start_hub()
    rss_before = rss_mib(hub.pid)[0]

    def flood(mode: str, n: int) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, FLOODER, "127.0.0.1", str(society.strict_port), mode, str(n), "120"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
        return proc

    # Under the bound first, so connections live long enough to meet the head timeout (over
    # it, the bound evicts the longest-idle ones before they reach it).
    floods = [flood("half", 150), flood("trickle", 20)]
    try:
        wait_for(
            lambda: health(society)["connections"]["cut_slow"] > 0, 30, "a slow connection cut"
        )
        floods.append(flood("idle", 350))  # now 520 want in: the bound makes room
        wait_for(lambda: health(society)["connections"]["cut_full"] > 0, 30, "a cut at the bound")
        took, stored = operator_say(society, "through the flood")
        assert stored["verified"] is True and stored["body"] == "through the flood"
        assert took < 60, f"bullpen say took {took:.1f} s under the flood"
        conns = health(society)["connections"]
        assert conns["max"] == 200
        assert conns["open"] <= 200 + 50  # the bound, plus what one accept batch may hold
        assert conns["cut_full"] > 0  # 520 wanted in, 200 fit: the longest-idle made room
        assert rss_mib(hub.pid)[0] - rss_before < 64
        # Every trickler is cut (by its head timeout, or at the bound): waited for, since a
        # quick run can reach here before the tricklers' last cut has reached them.
        wait_for(lambda: counts(floods[1])["cut"] >= 20, 30, "20 tricklers cut")
    finally:
        outputs = [proc.communicate(input="", timeout=60)[0] for proc in floods]
    # no trickler outlived its head timeout (the message: the tricklers' and the idlers' counts)
    assert parsed(outputs[1])["cut"] >= 20, f"trickle: {outputs[1]}; idle: {outputs[2]}"


def counts(flood: subprocess.Popen[str]) -> dict[str, int]:
    """A running bench/flood_client.py's counts so far (it answers a `counts` line)."""
    assert flood.stdin is not None and flood.stdout is not None
    flood.stdin.write("counts\n")
    flood.stdin.flush()
    return parsed(flood.stdout.readline())


def parsed(line: str) -> dict[str, int]:
    """The flood client's `opened=… cut=… max_held=…` line as numbers."""
    return {key: int(value) for key, value in (item.split("=") for item in line.split())}


@pytest.mark.long
def test_read_answers_are_bounded_in_bytes_and_resume_where_they_stopped(
    society: Society,
) -> None:
    """200 lines of 60 KB with read_max_bytes 1 MiB: each answer stays under it, and paging loses nothing."""
    set_hub(society.root, read_max_bytes=1024 * 1024)
    big_room(society.room, 200, 60_000)
    society.start_hub()
    seen: list[int] = []
    after = 0
    with httpx.Client(
        base_url=society.strict_url, timeout=30, headers=society.read_headers()
    ) as http:
        while True:
            answer = http.get("/read", params={"after": after, "limit": 1000})
            assert answer.status_code == 200
            assert len(answer.content) <= 1024 * 1024 + 1024
            body = answer.json()
            if not body["messages"]:
                break
            seen += [m["seq"] for m in body["messages"]]
            assert body["last_seq"] == body["messages"][-1]["seq"]
            after = body["last_seq"]
        assert seen == list(range(1, 201))
        # Small lines, many pages of one answer: all of them, in order, in one answer.
        for n in range(300):
            assert stranger(society, f"op{n % 10}", f"small {n}").status_code == 200
        body = http.get("/read", params={"after": 200, "limit": 1000}).json()
        assert [m["seq"] for m in body["messages"]] == list(range(201, 501))
        assert body["last_seq"] == 500


def test_readers_that_do_not_read_do_not_grow_the_hub(society: Society) -> None:
    """40 readers each asking for 4 MiB and reading none of it cost the hub under 1.5 MiB each."""
    big_room(society.room, 400, 60_000)
    hub = society.start_hub()
    rss_before = rss_mib(hub.pid)[0]

    token = society.home.read_token().decode()

    async def hold() -> float:
        writers = await unread(society.strict_port, 40, token)
        # The readers are answered in full (not refused): the answer starts with a 200.
        reader, probe = await asyncio.open_connection("127.0.0.1", society.strict_port)
        probe.write(
            b"GET /read?after=0&limit=1000 HTTP/1.1\r\nHost: hub\r\n"
            + f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        assert (await asyncio.wait_for(reader.readline(), 60)).startswith(b"HTTP/1.1 200")
        probe.close()
        await asyncio.sleep(3)
        grown = rss_mib(hub.pid)[0] - rss_before
        for writer in writers:
            writer.close()
        return grown

    grown = asyncio.run(hold())
    assert grown < 40 * 1.5, f"the hub grew {grown:.0f} MiB for 40 unread answers"
    took, _ = operator_say(society, "after the unread answers")
    assert took < 60


def test_unverified_posts_are_limited_per_nick_and_in_total(society: Society) -> None:
    """Past its nick's or everyone's bucket a stranger gets 429 and nothing is written; the operator never."""
    set_hub(  # buckets that barely refill while the test runs: 2 posts a nick, 4 in all
        society.root,
        unverified_nick_posts_per_s=0.01,
        unverified_total_posts_per_s=0.02,
        unverified_nick_bytes_per_s=20.0,
        unverified_burst_s=200.0,
    )
    society.start_hub()
    assert stranger(society, "dave", "x" * 3000).status_code == 200
    too_big = stranger(society, "dave", "x" * 3000)  # dave's 4,000 bytes are spent
    assert too_big.status_code == 429 and "this nick's" in too_big.json()["message"]
    assert [stranger(society, "alice").status_code for _ in range(3)] == [200, 200, 429]
    assert stranger(society, "bob").status_code == 200
    everyone = stranger(society, "bob")  # bob's own bucket has room; everyone's is spent
    assert everyone.status_code == 429
    assert everyone.json()["error"] == "rate_limited"
    assert "all unverified" in everyone.json()["message"]
    lines_before = len(society.lines())
    assert lines_before == 4
    for n in range(3):
        _, stored = operator_say(society, f"verified {n}")
        assert stored["verified"] is True
    assert len(society.lines()) == lines_before + 3
    assert health(society)["unverified_refused"] == 3


def test_low_disk_refuses_unverified_posts_and_health_reports_the_room(society: Society) -> None:
    """Below the low-water mark a stranger's post is refused with 507; a verified one still lands."""
    set_hub(society.root, min_free_disk_bytes=1 << 62)
    society.start_hub()
    refused = stranger(society)
    assert refused.status_code == 507 and refused.json()["error"] == "disk_low"
    _, stored = operator_say(society, "still room for me")
    assert stored["verified"] is True
    report = health(society)
    assert report["room_bytes"] == society.room.stat().st_size
    assert report["disk_free_bytes"] > 0


@pytest.mark.long
def test_reads_of_unknown_threads_do_not_delay_acknowledgements(
    society: Society, tmp_path: Path
) -> None:
    """64 reads of unindexed old threads on a 30 MB room (each a real scan, not an answer from
    the filter of thread names): posts are acknowledged while the scans run."""
    lines = 30 * 1024 * 1024 // 300
    big_room(society.room, lines, 80, threads=64)
    society.start_hub()

    async def run() -> tuple[list[float], int, int]:
        limits = httpx.Limits(max_connections=80)
        async with httpx.AsyncClient(
            base_url=society.strict_url,
            limits=limits,
            timeout=600,
            headers=society.read_headers(),
        ) as http:
            reads = [
                asyncio.create_task(http.get("/read", params={"thread": f"old-{i}"}))
                for i in range(64)
            ]
            await asyncio.sleep(0.5)
            latencies = []
            async with society.home.client("operator", timeout=60) as client:
                for n in range(10):
                    started = time.monotonic()
                    await client.say("@everyone", f"during the scans {n}")
                    latencies.append(time.monotonic() - started)
            pending = sum(not task.done() for task in reads)
            answers = await asyncio.gather(*reads)
            found = sum(len(a.json()["messages"]) for a in answers)
        return latencies, pending, found

    latencies, pending, found = asyncio.run(run())
    assert pending > 0, "every scan ended before the posts: the room is too small to tell"
    assert max(latencies) < 5, f"a post waited {max(latencies):.2f} s behind the scans"
    expected = sum(1 for seq in range(1, lines + 1) if old_thread(seq, 64))
    assert found == expected  # every scan found every line of its thread


def test_thread_reads_find_every_line_of_the_thread_and_nothing_else(tmp_path: Path) -> None:
    """A scanned thread holds its own lines (from the file and the cache), not a "thread" key in data."""
    from room.jsonl import JsonlLog
    from room.log import Draft, Filter
    from room.message import Post

    def draft(n: int, thread: str | None, data: dict | None = None) -> Draft:
        fields = {"from": "w", "to": "@sink", "type": "chat", "body": f"line {n}", "thread": thread}
        return Draft(Post.model_validate({**fields, "data": data}), verified=False)

    async def run() -> tuple[list[int], list[int], list[int]]:
        room = tmp_path / "room.jsonl"
        log = JsonlLog(room, cache_lines=16)
        await log.open()
        for n in range(200):  # most of these leave the 16-line cache
            thread = "t" if n % 7 == 0 else None
            await log.append(draft(n, thread, {"thread": "t"} if n % 5 == 0 else None))
        await log.close()
        log = JsonlLog(room, cache_lines=16)
        await log.open()
        scans = await asyncio.gather(*(log.read(0, 1000, Filter(thread="t")) for _ in range(8)))
        await log.append(draft(200, "t"))
        later = await log.read(0, 1000, Filter(thread="t"))  # from the index now, plus the new line
        paged = await log.read(100, 3, Filter(thread="t"))
        await log.close()
        seqs = [[json.loads(line)["seq"] for line in r.lines] for r in (*scans, later, paged)]
        assert all(s == seqs[0] for s in seqs[:8])
        return seqs[0], seqs[8], seqs[9]

    first, later, paged = asyncio.run(run())
    expected = [n + 1 for n in range(200) if n % 7 == 0]
    assert first == expected
    assert later == [*expected, 201]
    assert paged == [s for s in expected if s > 100][:3]

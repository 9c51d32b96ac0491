"""Benchmark the hub under a local flood: connections, unread answers, scans of unknown threads.

    python bench/flood.py            # full run (a few minutes: it builds a 300 MB room)
    python bench/flood.py --quick    # smaller counts and shorter windows: a smoke check

Three measures, each against a real hub process with default settings:

1. 20,000 hostile connections (idle and half-open, reopened as fast as the
   hub cuts them) plus a trickler sending a header a byte every 0.5 s:
   how long the operator's real `bullpen say` (a CLI post with proof) takes,
   against the same command on an idle hub, and the hub's RSS.
2. Readers that ask for big answers and never read them: the hub's RSS.
3. 256 concurrent reads of threads the hub has not indexed on a 300 MB
   room: the operator's post latency, against the same posts on the idle hub.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.table import print_table  # noqa: E402
from room.chain import GENESIS, line_hash  # noqa: E402
from tests.support import Society, run_cli  # noqa: E402

CLIENT = str(REPO / "bench" / "flood_client.py")


def rss_mib(pid: int) -> tuple[float, float]:
    """The process's resident memory now and at its peak, in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def cli_say(society: Society, body: str) -> float:
    """Seconds for one `bullpen say` from start to the stored line printed."""
    started = time.perf_counter()
    done = run_cli(society.root, "say", "@everyone", body, timeout=120)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verified"] is True
    return elapsed


def cli_startup() -> float:
    """Seconds for `bullpen --help`: what the machine's load alone costs a command."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "agents.cli", "--help"], capture_output=True, check=True)
    return time.perf_counter() - started


def flooders(
    society: Society, plan: list[tuple[str, int]], seconds: float
) -> list[subprocess.Popen[str]]:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                CLIENT,
                "127.0.0.1",
                str(society.strict_port),
                mode,
                str(n),
                str(seconds),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for mode, n in plan
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
    return procs


def connection_flood(
    base: Path, total: int, rows: list[tuple[str, str, str]], quick: bool = False
) -> None:
    society = Society(base / "home-conn")
    hub = society.start_hub()
    try:
        idle = [cli_say(society, f"idle {i}") for i in range(3)]
        startup = cli_startup()
        rss_idle = rss_mib(hub.pid)[0]
        quarter = total // 4
        plan = [
            ("idle", quarter),
            ("idle", quarter),
            ("half", quarter),
            ("half", total - 3 * quarter),
        ]
        procs = flooders(society, [*plan, ("trickle", 200)], seconds=600)
        time.sleep(2 if quick else 5)  # let the flood reach its steady churn
        health = httpx.get(f"{society.strict_url}/health", timeout=30).json()
        flooded = [cli_say(society, f"flooded {i}") for i in range(2 if quick else 5)]
        startup_flooded = cli_startup()
        probe = asyncio.run(post_latencies(society, 8 if quick else 20))
        rss_now, _ = rss_mib(hub.pid)
        results = [p.communicate(input="", timeout=120)[0].strip() for p in procs]
        rss_peak = rss_mib(hub.pid)[1]
    finally:
        society.stop_all()
    conns = health.get("connections", {})
    rows.append(
        ("`bullpen say`, idle hub (median of 3)", f"{statistics.median(idle):.2f} s", "baseline")
    )
    rows.append(
        (
            f"`bullpen say` under {total:,} idle/half-open + 200 tricklers (max of {len(flooded)})",
            f"{max(flooded):.2f} s",
            "goal < 5 s",
        )
    )
    rows.append(
        (
            "`bullpen --help` (start-up only), idle / flooded",
            f"{startup:.2f} / {startup_flooded:.2f} s",
            "the machine's load, not the hub",
        )
    )
    rows.append(
        (
            "operator post (HTTP, proof) under the flood, median / max",
            f"{statistics.median(probe) * 1e3:.0f} / {max(probe) * 1e3:.0f} ms",
            "",
        )
    )
    rows.append(
        (
            "hub RSS idle / flooded / peak",
            f"{rss_idle:.0f} / {rss_now:.0f} / {rss_peak:.0f} MiB",
            "",
        )
    )
    rows.append(
        (
            "hub connections open / max / cut slow / cut at bound",
            f"{conns.get('open')} / {conns.get('max')} / {conns.get('cut_slow')} / {conns.get('cut_full')}",
            "",
        )
    )
    opened = sum(int(r.split()[0].split("=")[1]) for r in results)
    held = sum(int(r.split()[2].split("=")[1]) for r in results)
    rows.append(("flood connections opened / most held at once", f"{opened:,} / {held:,}", ""))


OLD_EVERY = 100  # with `threads`, one line in this many belongs to an old thread


def old_thread(seq: int, threads: int) -> str | None:
    """The old thread line `seq` of big_room belongs to, if any: `old-<k>`, k < threads."""
    return f"old-{seq // OLD_EVERY % threads}" if threads and seq % OLD_EVERY == 0 else None


def big_room(path: Path, lines: int, body: int, threads: int = 0) -> None:
    """A valid chained room of `lines` lines with `body`-byte bodies; with `threads`, one line
    in OLD_EVERY belongs to one of that many old threads, which a restarted hub has not indexed:
    reading one is a real scan of the room, not an answer from the filter of thread names."""
    prev = GENESIS
    pad = "x" * body
    with path.open("wb") as f:
        for seq in range(1, lines + 1):
            thread = old_thread(seq, threads)
            named = f'"{thread}"' if thread else "null"
            raw = (
                f'{{"seq":{seq},"id":"X{seq:025d}","ts":"2026-12-01T00:00:00.000Z","from":"load",'
                f'"to":"@sink","type":"chat","body":"{pad}","data":null,"in_reply_to":null,'
                f'"thread":{named},"sig":null,"verified":false,"prev":"{prev}"}}'
            ).encode()
            prev = line_hash(raw)
            f.write(raw + b"\n")


async def unread(port: int, n: int, token: str) -> list[asyncio.StreamWriter]:
    """`n` connections each asking for the biggest answer (with the read token, so the hub
    answers in full) and never reading it."""
    writers = []
    request = (
        "GET /read?after=0&limit=1000 HTTP/1.1\r\nHost: hub\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    ).encode()
    for _ in range(n):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        writers.append(writer)
    return writers


def unread_answers(
    base: Path, readers: int, rows: list[tuple[str, str, str]], quick: bool = False
) -> None:
    society = Society(base / "home-unread")
    # 120 MB (--quick: 9 MB): either way every answer is cut at read_max_bytes (4 MiB).
    big_room(society.room, 150 if quick else 2000, 60_000)
    hub = society.start_hub()
    try:
        rss_idle = rss_mib(hub.pid)[0]

        async def hold() -> float:
            writers = await unread(society.strict_port, readers, society.home.read_token().decode())
            await asyncio.sleep(2 if quick else 5)
            peak = rss_mib(hub.pid)[0]
            for writer in writers:
                writer.close()
            return peak

        held = asyncio.run(hold())
        say = cli_say(society, "after the unread answers")
    finally:
        society.stop_all()
    rows.append(
        (
            f"hub RSS idle / with {readers} unread 4 MiB answers",
            f"{rss_idle:.0f} / {held:.0f} MiB",
            f"{(held - rss_idle) / readers * 1024:.0f} KiB per reader",
        )
    )
    rows.append(("`bullpen say` after them", f"{say:.2f} s", ""))


async def post_latencies(society: Society, count: int) -> list[float]:
    samples = []
    async with society.home.client("operator", timeout=60) as client:
        for i in range(count):
            started = time.perf_counter()
            await client.say("@everyone", f"latency {i}")
            samples.append(time.perf_counter() - started)
            await asyncio.sleep(0.05)
    return samples


async def scans_and_posts(society: Society, readers: int, count: int) -> tuple[list[float], int]:
    limits = httpx.Limits(max_connections=readers + 8)
    async with httpx.AsyncClient(
        base_url=society.strict_url, limits=limits, timeout=600, headers=society.read_headers()
    ) as http:
        reads = [  # old threads the restarted hub has not indexed: each a scan of the room
            asyncio.create_task(http.get("/read", params={"thread": f"old-{i}"}))
            for i in range(readers)
        ]
        await asyncio.sleep(1.0)  # every read is in the hub by now
        samples = await post_latencies(society, count)
        finished = sum(task.done() for task in reads)
        for task in reads:
            task.cancel()
        await asyncio.gather(*reads, return_exceptions=True)
    return samples, finished


def unknown_threads(
    base: Path, megabytes: int, readers: int, rows: list[tuple[str, str, str]], posts: int = 40
) -> None:
    society = Society(base / "home-scan")
    started = time.perf_counter()
    big_room(society.room, megabytes * 1_000_000 // 300, 80, threads=readers)  # ~300-byte lines
    built = time.perf_counter() - started
    size = society.room.stat().st_size
    society.start_hub()
    try:
        idle = asyncio.run(post_latencies(society, posts))
        loaded, finished = asyncio.run(scans_and_posts(society, readers, posts))
    finally:
        society.stop_all()
    med_idle, med_loaded = statistics.median(idle), statistics.median(loaded)
    p90 = lambda xs: sorted(xs)[int(len(xs) * 0.9)]  # noqa: E731
    rows.append((f"room for scans ({size / 1e6:.0f} MB, built in {built:.0f} s)", "", ""))
    rows.append(
        (
            "operator post latency, idle (median / p90)",
            f"{med_idle * 1e3:.1f} / {p90(idle) * 1e3:.1f} ms",
            "baseline",
        )
    )
    rows.append(
        (
            f"... during {readers} reads of unindexed threads (each a scan)",
            f"{med_loaded * 1e3:.1f} / {p90(loaded) * 1e3:.1f} ms",
            f"{med_loaded / med_idle:.2f}x median, goal < 2x ({finished} reads done meanwhile)",
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bullpen-flood-") as tmp:
        base = Path(tmp)
        connection_flood(base, 2000 if args.quick else 20_000, rows, args.quick)
        unread_answers(base, 20 if args.quick else 200, rows, args.quick)
        unknown_threads(base, 10 if args.quick else 300, 256, rows, 15 if args.quick else 40)
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    rows.append((f"load average at the end ({os.cpu_count()} CPUs)", load, ""))
    print_table([("measure", "value", "note"), *rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())

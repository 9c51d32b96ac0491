"""Benchmark the room: acknowledged posts per second and tail reads, against baselines.

    python bench/room.py            # full run (about a minute)
    python bench/room.py --quick    # smaller counts, for a smoke check

Everything runs in one script on one machine, so the figures are ratios
against baselines measured in the same run: the raw single-writer
write+fsync rate of the same disk (before and after the posts: a shared
disk's rate moves), and a 1,000-line room for reads. The hub's CPU per post
and its post path stage by stage (bench/poststages.py) say where the time
goes whatever the disk does.
"""

from __future__ import annotations

import argparse
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

from bench.poststages import floor_server, stage_costs  # noqa: E402
from bench.table import print_table  # noqa: E402
from room.chain import GENESIS, line_hash  # noqa: E402
from room.client import read_file  # noqa: E402
from room.reader import RoomFile  # noqa: E402
from tests.support import Society, free_port, set_hub  # noqa: E402

CLIENT = str(REPO / "bench" / "load_client.py")


def raw_fsync_rate(folder: Path, seconds: float) -> float:
    """A single writer appending ~200-byte lines with write+fsync each: the disk's ceiling."""
    path = folder / "raw.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    line = b'{"seq":1,"body":"' + b"x" * 180 + b'"}\n'
    count, started = 0, time.perf_counter()
    try:
        while time.perf_counter() - started < seconds:
            os.write(fd, line)
            os.fsync(fd)
            count += 1
    finally:
        os.close(fd)
        path.unlink()
    return count / (time.perf_counter() - started)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU a process has used, every thread counted (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def post_rate(society: Society, clients: int, per_client: int, signed: bool) -> float:
    """Acknowledged posts per second through the strict listener from `clients` processes."""
    return measure_posts(society, clients, per_client, signed)[0]


def measure_posts(
    society: Society, clients: int, per_client: int, signed: bool, hub_pid: int | None = None
) -> tuple[float, float]:
    """Acknowledged posts per second through the strict listener from `clients` processes,
    and the hub's CPU microseconds per post meanwhile (0 without its pid)."""
    secret = society.home.trust.secret_file if signed else None
    return drive(society.strict_port, clients, per_client, secret, hub_pid)


def drive(
    port: int, clients: int, per_client: int, secret_file: Path | None, pid: int | None
) -> tuple[float, float]:
    """`clients` load clients posting `per_client` each to a port: answers/s, and the CPU
    microseconds per answer of the server `pid` meanwhile (0 without a pid)."""
    hub_pid, signed = pid, secret_file is not None
    secret = [str(secret_file)] if secret_file is not None else []
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                CLIENT,
                "127.0.0.1",
                str(port),
                "operator" if signed else f"load{i}",
                str(per_client),
                *secret,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(clients)
    ]
    # each client prepares its requests, then waits on stdin: start them together
    time.sleep(0.5 + per_client / 4000)
    cpu_before = cpu_seconds(hub_pid) if hub_pid is not None else 0.0
    started = time.perf_counter()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [proc.communicate(timeout=600)[0].split() for proc in procs]
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(hub_pid) - cpu_before if hub_pid is not None else 0.0
    ok = sum(int(r[0]) for r in results)
    assert ok == clients * per_client, (
        f"only {ok} of {clients * per_client} posts were acknowledged"
    )
    return ok / elapsed, cpu / ok * 1e6


def http_floor(quick: bool) -> list[tuple[str, str, str]]:
    """CPU per request of the hub's HTTP stack around an app that does nothing: the part of
    the hub's CPU per post no stage of the post path can cut."""
    port = free_port()
    server = floor_server(port)
    rows = []
    try:
        for clients, per in ((1, 1500), (8, 400)) if quick else ((1, 3000), (8, 1500)):
            rate, cpu = drive(port, clients, per, None, server.pid)
            rows.append(
                (
                    f"  HTTP floor (empty app), {clients} client{'s' if clients > 1 else ''}",
                    f"{cpu:,.0f} us",
                    f"CPU per request; {rate:,.0f}/s",
                )
            )
    finally:
        server.terminate()
        server.wait(10)
    return rows


def synthetic_room(path: Path, lines: int) -> None:
    """A valid chained room of `lines` lines, written fast."""
    prev = GENESIS
    with path.open("wb") as f:
        for seq in range(1, lines + 1):
            raw = (
                f'{{"seq":{seq},"id":"X{seq:025d}","ts":"2026-12-01T00:00:00.000Z","from":"load",'
                f'"to":"@sink","type":"chat","body":"message {seq}","data":null,"in_reply_to":null,'
                f'"thread":null,"sig":null,"verified":false,"prev":"{prev}"}}'
            ).encode()
            prev = line_hash(raw)
            f.write(raw + b"\n")


def time_last_ten(path: Path, repeats: int) -> float:
    """Median seconds to read the last 10 lines the way `bullpen read --last 10` does."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        with RoomFile(path) as room:
            after = room.last_seq() - 10
        lines, _ = read_file(path, after)
        samples.append(time.perf_counter() - started)
        assert len(lines) == 10
    return statistics.median(samples)


def time_hub_last_ten(society: Society, repeats: int) -> float:
    head = httpx.get(f"{society.strict_url}/health").json()["seq"]
    samples = []
    with httpx.Client(base_url=society.strict_url, headers=society.read_headers()) as client:
        for _ in range(repeats):
            started = time.perf_counter()
            response = client.get("/read", params={"after": head - 10})
            samples.append(time.perf_counter() - started)
            # /read needs the read token: a refusal here is a broken bench, said as such.
            response.raise_for_status()
            assert len(response.json()["messages"]) == 10
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    big = 100_000 if args.quick else 1_000_000
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bullpen-bench-") as tmp:
        base = Path(tmp)
        society = Society(base / "home")
        # The load clients post unverified at full speed: turn the stranger limits off.
        set_hub(
            society.root,
            unverified_nick_posts_per_s=0,
            unverified_nick_bytes_per_s=0,
            unverified_total_posts_per_s=0,
            unverified_total_bytes_per_s=0,
        )
        hub = society.start_hub()
        try:
            raw = raw_fsync_rate(society.room.parent, 3.0)
            rows.append(("raw write+fsync, 1 writer", f"{raw:,.0f}/s", "baseline"))
            one, one_cpu = measure_posts(society, 1, 1500 if args.quick else 3000, False, hub.pid)
            cpu_rows = [("hub CPU per post, 1 client", f"{one_cpu:,.0f} us", "")]
            rows.append(("hub, 1 client", f"{one:,.0f}/s", f"{one / raw:.0%} of raw"))
            for signed in (False, True):
                eight, cpu = measure_posts(society, 8, 400 if args.quick else 1500, signed, hub.pid)
                label = "hub, 8 clients" + (", HMAC-signed" if signed else "")
                rows.append((label, f"{eight:,.0f}/s", f"{eight / raw:.0%} of raw"))
                cpu_rows.append((f"hub CPU per post, {label[5:]}", f"{cpu:,.0f} us", ""))
            rows.append(
                (
                    "raw write+fsync again, 1 writer",
                    f"{raw_fsync_rate(society.room.parent, 3.0):,.0f}/s",
                    "the disk after",
                )
            )
            rows += cpu_rows
            stages = stage_costs(society.home.trust, society.secret(), 500 if args.quick else 2000)
            rows += [
                (f"  stage: {name}", f"{us:,.1f} us", "in-process, CPU") for name, us in stages
            ]
            rows.append(
                (
                    "  stages, sum",
                    f"{sum(us for _, us in stages):,.1f} us",
                    "the rest: HTTP, loop, writer thread",
                )
            )
            rows += http_floor(args.quick)
        finally:
            society.stop_all()
        # The posts' table now: the reads below start hubs on big rooms, which may time out
        # on a loaded machine, and must not take these figures with them.
        print_table([("measure", "value", "vs baseline"), *rows])
        sys.stdout.flush()
        rows = []
        small_room, big_room = base / "small.jsonl", base / "big.jsonl"
        synthetic_room(small_room, 1000)
        synthetic_room(big_room, big)
        small = time_last_ten(small_room, 50)
        large = time_last_ten(big_room, 50)
        rows.append(("read last 10, 1,000-line room", f"{small * 1e3:.2f} ms", "baseline"))
        rows.append(
            (
                f"read last 10, {big:,}-line room",
                f"{large * 1e3:.2f} ms",
                f"ratio {large / small:.2f}",
            )
        )
        hub_times = []
        for room_file in (small_room, big_room):
            society = Society(base / f"home-{room_file.stem}")
            os.replace(room_file, society.room)
            society.start_hub()
            try:
                hub_times.append(time_hub_last_ten(society, 50))
            finally:
                society.stop_all()
        rows.append(("hub /read last 10, 1,000 lines", f"{hub_times[0] * 1e3:.2f} ms", "baseline"))
        rows.append(
            (
                f"hub /read last 10, {big:,} lines",
                f"{hub_times[1] * 1e3:.2f} ms",
                f"ratio {hub_times[1] / hub_times[0]:.2f}",
            )
        )
    print()
    print_table([("measure", "value", "vs baseline"), *rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark lurkers: wake latency, idle CPU and memory, against a naive 1 s poller.

    python bench/lurkers.py            # 20 lurkers, 500 posts, 60 s idle window
    python bench/lurkers.py --quick    # 20 lurkers, 30 posts, 2 s idle windows: a smoke check

Wake latency is measured from the moment the hub's acknowledgment reaches
the poster to the moment the addressed lurker's handler starts (the handler
writes the time down). A lurker tailing the file can see a line before its
fsync completes, so single latencies may be negative; that is reported as
measured. The baseline is 20 lurkers that each re-read the file once a second, each post
reaching them at a random phase of their cycle.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.table import percentile, print_table  # noqa: E402
from room.message import Post  # noqa: E402
from tests.support import Society, add_nick, wait_for  # noqa: E402
from trust.proof import SecretSigner  # noqa: E402

NICKS = [f"b{n:02d}" for n in range(1, 21)]
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def memory_kb(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()

    def field(text: str, name: str) -> int:
        for line in text.splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1])
        return 0

    private = field(rollup, "Private_Clean") + field(rollup, "Private_Dirty")
    return {"rss": field(status, "VmRSS"), "pss": field(rollup, "Pss"), "uss": private}


def marks(path: Path) -> dict[str, float]:
    if not path.exists():
        return {}
    found = {}
    for line in path.read_text().splitlines():
        ident, stamp = line.split()
        found.setdefault(ident, float(stamp))
    return found


def measure_latency(
    society: Society,
    signer: SecretSigner,
    targets: list[str],
    count: int,
    marks_file: Path,
    timeout: float,
    phase: random.Random | None = None,
    extra: dict[str, object] | None = None,
) -> tuple[list[float], list[float]]:
    """(from the ack's arrival, from the post's sending) to the handler's start, in seconds.

    With `phase`, each post waits a random 0-1 s first, so it reaches a once-a-second poller at
    a random point of its cycle (without it, the next post would always follow the poller's
    read at once, and wait nearly a whole second: an unfair baseline). `extra`: fields added
    to each post (a thread and data, as a run's step asks carry: bench/telemetry.py).
    """
    latencies, from_send = [], []
    with httpx.Client(base_url=society.strict_url, timeout=10) as client:
        for n in range(count):
            if phase is not None:
                time.sleep(phase.random())  # a random phase against the poller's cycle
            nick = targets[n % len(targets)]
            payload = {"from": "operator", "to": f"@{nick}", "type": "ask", "body": f"wake {n}"}
            payload.update(extra or {})
            payload.update(signer.prove(Post.model_validate(payload)))
            body = json.dumps(payload)
            sent = time.time()
            answer = client.post("/say", content=body)
            acked = time.time()
            ident = answer.json()["id"]
            stamp = wait_for(
                lambda i=ident: marks(marks_file).get(i), timeout, f"the handler for {ident}"
            )
            latencies.append(stamp - acked)
            from_send.append(stamp - sent)
    return latencies, from_send


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    # --quick only proves the bench still runs to its table (bench/quick.py, in CI): the
    # baseline's random phases alone cost about half a second a post.
    posts, forks, polls = (30, 10, 10) if args.quick else (500, 40, 40)
    idle_s = 2.0 if args.quick else 60.0
    rows = []
    with tempfile.TemporaryDirectory(prefix="bullpen-bench-") as tmp:
        society = Society(Path(tmp) / "home")
        for nick in NICKS:
            add_nick(society.root, nick, handler="bench.steps:amark")
        # A blocking step runs in a forked child that its timeout can kill: that costs a fork.
        add_nick(society.root, "blocking", handler="bench.steps:mark")
        marks_file = Path(tmp) / "marks"
        env = {"BULLPEN_BENCH_MARKS": str(marks_file), "PYTHONPATH": str(REPO)}
        society.start_hub()
        try:
            lurkers = [society.start_lurker(nick, env=env) for nick in NICKS]
            signer = SecretSigner(society.secret())
            measure_latency(society, signer, NICKS, 20, marks_file, 10)  # warm up
            herd = sum(cpu_seconds(p.pid) for p in lurkers)
            latencies, from_send = measure_latency(society, signer, NICKS, posts, marks_file, 10)
            herd = sum(cpu_seconds(p.pid) for p in lurkers) - herd
            ms = [v * 1000 for v in latencies]
            sent_ms = [v * 1000 for v in from_send]
            rows.append(("wake after ack p50, 20 lurkers", f"{percentile(ms, 0.5):.2f} ms"))
            rows.append(("wake after ack p99, 20 lurkers", f"{percentile(ms, 0.99):.2f} ms"))
            rows.append(
                ("wake after sending p50 (upper bound)", f"{percentile(sent_ms, 0.5):.2f} ms")
            )
            rows.append(
                ("wake after sending p99 (upper bound)", f"{percentile(sent_ms, 0.99):.2f} ms")
            )
            rows.append(("wake after ack mean", f"{statistics.mean(ms):.2f} ms"))
            # Every lurker wakes for every post (one inotify folder): what the herd costs.
            rows.append(("CPU of all 20 lurkers per post", f"{herd / posts * 1000:.2f} ms"))
            blocking = society.start_lurker("blocking", env=env)
            measure_latency(society, signer, ["blocking"], 5, marks_file, 20)  # warm up
            forked, _ = measure_latency(society, signer, ["blocking"], forks, marks_file, 20)
            forked_ms = [v * 1000 for v in forked]
            rows.append(
                (
                    "a blocking step's start after ack p50 / p99 (a forked child)",
                    f"{percentile(forked_ms, 0.5):.2f} / {percentile(forked_ms, 0.99):.2f} ms",
                )
            )
            blocking.stop()
            before = sum(cpu_seconds(p.pid) for p in lurkers)
            started = time.monotonic()
            time.sleep(idle_s)  # the idle window being measured
            used = sum(cpu_seconds(p.pid) for p in lurkers) - before
            share = used / (time.monotonic() - started)
            rows.append((f"CPU of 20 idle lurkers over {idle_s:g} s", f"{share:.3%} of a core"))
            memory = memory_kb(lurkers[0].pid)
            rows.append(("one idle lurker: RSS", f"{memory['rss'] / 1024:.1f} MB"))
            rows.append(("one idle lurker: PSS (fair share)", f"{memory['pss'] / 1024:.1f} MB"))
            rows.append(("one idle lurker: USS (its own)", f"{memory['uss'] / 1024:.1f} MB"))
            for lurker in lurkers:
                lurker.stop()
            naive_marks = Path(tmp) / "naive-marks"
            pollers = [f"naive{n}" for n in range(len(NICKS))]
            naive = [
                subprocess.Popen(
                    [
                        sys.executable,
                        str(REPO / "bench" / "naive_lurker.py"),
                        str(society.room),
                        nick,
                        str(naive_marks),
                    ]
                )
                for nick in pollers
            ]
            try:
                naive_latency, _ = measure_latency(
                    society, signer, pollers, polls, naive_marks, 10, phase=random.Random(1)
                )
                naive_ms = [v * 1000 for v in naive_latency]
                rows.append(
                    ("baseline 1 s poller: wake p50", f"{percentile(naive_ms, 0.5):.0f} ms")
                )
                rows.append(
                    ("baseline 1 s poller: wake p99", f"{percentile(naive_ms, 0.99):.0f} ms")
                )
                before = sum(cpu_seconds(p.pid) for p in naive)
                started = time.monotonic()
                time.sleep(idle_s)  # the idle window being measured
                used = sum(cpu_seconds(p.pid) for p in naive) - before
                naive_share = used / (time.monotonic() - started)
                rows.append(
                    (
                        f"baseline: CPU of 20 idle pollers over {idle_s:g} s",
                        f"{naive_share:.3%} of a core",
                    )
                )
            finally:
                for poller in naive:
                    poller.kill()
                    poller.wait()
        finally:
            society.stop_all()
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

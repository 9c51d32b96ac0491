"""Benchmark the room on JetStream beside the JSONL room, in one run on one machine.

    python bench/jetstream.py            # 8 clients x 1000 posts, 300 wakes per room
    python bench/jetstream.py --quick    # 8 clients x 60 posts, 30 wakes: a smoke check

Three rooms, same script, same run: the JSONL file, a single JetStream node
and a 3-node R3 cluster on loopback (nats-server from $BULLPEN_NATS_SERVER
or PATH; >= 2.10 runs with `sync_interval: always`, 2.9 cannot). For each:
acknowledged posts per second from 8 concurrent client processes
(bench/load_client.py, HMAC-signed, so the nonce store is in the path),
and wake latency p50/p99 of 4 lurkers (bench/steps.py marks when the
handler starts; measured from the ack's arrival, as in bench/lurkers.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.lurkers import measure_latency  # noqa: E402
from bench.room import post_rate  # noqa: E402
from bench.table import percentile  # noqa: E402
from tests.jetstream.servers import NatsCluster  # noqa: E402
from tests.support import Society, StreamSociety, add_nick  # noqa: E402
from trust.proof import SecretSigner  # noqa: E402

NICKS = ["w1", "w2", "w3", "w4"]


def measure(society: Society, base: Path, posts: int, wakes: int) -> dict[str, float]:
    for nick in NICKS:
        add_nick(society.root, nick, handler="bench.steps:mark")
    marks = base / f"marks-{society.root.name}"
    env = {"BULLPEN_BENCH_MARKS": str(marks), "PYTHONPATH": str(REPO)}
    society.start_hub()
    try:
        rate = post_rate(society, 8, posts, signed=True)
        for nick in NICKS:
            society.start_lurker(nick, env=env)
        signer = SecretSigner(society.secret())
        measure_latency(society, signer, NICKS, 20, marks, 10)  # warm up
        latencies, _ = measure_latency(society, signer, NICKS, wakes, marks, 10)
    finally:
        society.stop_all()
    ms = [v * 1000 for v in latencies]
    return {
        "posts_per_s": rate,
        "wake_p50_ms": percentile(ms, 0.5),
        "wake_p99_ms": percentile(ms, 0.99),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    posts, wakes = (60, 30) if args.quick else (1000, 300)
    rows: list[tuple[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="bullpen-bench-js-") as tmp:
        base = Path(tmp)
        rows.append(("JSONL file", measure(Society(base / "jsonl"), base, posts, wakes)))
        for size in (1, 3):
            cluster = NatsCluster(base / f"nats{size}", size).start()
            try:
                label = "JetStream, 1 node (R1)" if size == 1 else "JetStream, 3 nodes (R3)"
                society = StreamSociety(base / f"js{size}", cluster.urls, size)
                rows.append((label, measure(society, base, posts, wakes)))
                described = cluster.describe()
            finally:
                cluster.stop()
    width = max(len(name) for name, _ in rows)
    print(
        f"{described.split(',')[0]}; {'sync_interval always' if 'always' in described else 'default sync (no fsync before ack)'}"
    )
    print(
        f"{'room':<{width}}  {'acked posts/s (8 clients, signed)':>34}  {'wake p50':>9}  {'wake p99':>9}"
    )
    for name, row in rows:
        print(
            f"{name:<{width}}  {row['posts_per_s']:>34,.0f}  {row['wake_p50_ms']:>6.2f} ms  {row['wake_p99_ms']:>6.2f} ms"
        )
    print(json.dumps({"cpus": os.cpu_count(), "rows": dict(rows)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the room's Merkle tree: proof size and time at 10^6 lines, and its cost to appends.

    python bench/tlog.py            # 10^6 lines, about two minutes
    python bench/tlog.py --quick    # 2 x 10^4 lines, fewer posts and rounds: a smoke check

Three measures, each against a baseline from the same run (the machine is
shared, so only ratios travel):

- the tree on disk (room/tree.py) built from 10^6 room-sized lines: lines/s;
- inclusion and consistency proofs from it at 10^6 (RFC 9162): hashes,
  bytes, and the time to make and to check one, against the O(log n) bound;
- the JSONL log's acknowledged appends per second (64 concurrent posters,
  group commit, fsync) with the hub's tree hook (room/tlog.py) and without,
  in alternating rounds; the goal is >= 95 %;
- the delay from a post's answer to a signed checkpoint that covers it, on a
  real hub as `bullpen init` configures it (the hub signs soon after growth).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from bench.room import post_rate  # noqa: E402
from bench.table import percentile, print_table  # noqa: E402
from room.jsonl import JsonlLog  # noqa: E402
from room.log import Draft  # noqa: E402
from room.message import Post  # noqa: E402
from room.tlog import TransparencyLog  # noqa: E402
from room.tree import Tree  # noqa: E402
from tests.support import Society  # noqa: E402
from trust import merkle  # noqa: E402

LINE = (
    b'{"seq":%d,"id":"01JABCDEFGHJKMNPQRSTVWXYZ0","ts":"2026-12-03T07:00:00.000Z",'
    b'"from":"visitor","to":"@echo","type":"chat","body":"a line of about the size a room '
    b'holds, %d","data":null,"in_reply_to":null,"thread":null,"sig":null,"verified":false,'
    b'"prev":"0000000000000000000000000000000000000000000000000000000000000000"}'
)


def build_tree(folder: Path, lines: int) -> tuple[Tree, float]:
    """The tree over `lines` lines, and the seconds spent in the tree (not making the lines)."""
    tree = Tree(folder / "room.jsonl.tlog")
    spent = 0.0
    batch = 4096
    for start in range(0, lines, batch):
        made = [LINE % (i + 1, i) for i in range(start, min(lines, start + batch))]
        started = time.perf_counter()
        tree.append(made)
        spent += time.perf_counter() - started
    return tree, spent


def proofs(tree: Tree, samples: int) -> dict[str, list[float]]:
    """Make and check `samples` proofs of each kind; times in microseconds, sizes in hashes."""
    n = tree.size
    root = tree.root()
    rng = random.Random(29)
    out: dict[str, list[float]] = {k: [] for k in ("inc_make", "inc_check", "inc_len")}
    out.update({k: [] for k in ("con_make", "con_check", "con_len")})
    for _ in range(samples):
        index = rng.randrange(n)
        t0 = time.perf_counter()
        path = tree.inclusion(index, n)
        t1 = time.perf_counter()
        ok = merkle.verify_inclusion(
            index, n, merkle.leaf_hash(LINE % (index + 1, index)), path, root
        )
        t2 = time.perf_counter()
        assert ok, index
        out["inc_make"].append((t1 - t0) * 1e6)
        out["inc_check"].append((t2 - t1) * 1e6)
        out["inc_len"].append(len(path))
        old = rng.randrange(1, n)
        t0 = time.perf_counter()
        path = tree.consistency(old, n)
        t1 = time.perf_counter()
        ok = merkle.verify_consistency(old, n, tree.root(old), root, path)
        t2 = time.perf_counter()
        assert ok, old
        out["con_make"].append((t1 - t0) * 1e6)
        out["con_check"].append((t2 - t1) * 1e6)
        out["con_len"].append(len(path))
    return out


def _draft(i: int) -> Draft:
    post = Post.model_validate(
        {"from": "visitor", "to": "@echo", "type": "chat", "body": f"a bench post {i}"}
    )
    return Draft(post, False)


async def _append_rate(folder: Path, posts: int, with_tree: bool) -> tuple[float, float]:
    """Acknowledged appends per second, and this process's CPU time per append (us)."""
    room = folder / f"room-{with_tree}-{time.monotonic_ns()}.jsonl"
    log = JsonlLog(room)
    await log.open()
    tree = None
    if with_tree:
        tree = Tree(folder / (room.name + ".tlog"))
        tlog = TransparencyLog(room, tree, log, Ed25519PrivateKey.generate(), "bullpen/bench")
        log.on_stored = tlog.stored
    drafts = [_draft(i) for i in range(posts)]
    posters = 64

    async def poster(k: int) -> None:
        for draft in drafts[k::posters]:
            await log.append(draft)

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(poster(k) for k in range(posters)))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    await log.close()
    if tree is not None:
        assert tree.size == posts
        tree.close()
    return posts / elapsed, cpu / posts * 1e6


Runs = list[tuple[float, float]]


def append_rates(folder: Path, posts: int, rounds: int) -> tuple[Runs, Runs]:
    without: Runs = []
    with_tree: Runs = []
    for _ in range(rounds):  # alternate, so a busy moment of the shared machine hits both
        without.append(asyncio.run(_append_rate(folder, posts, False)))
        with_tree.append(asyncio.run(_append_rate(folder, posts, True)))
    return without, with_tree


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def real_hub(folder: Path, clients: int, per_client: int) -> tuple[float, float, int]:
    """A real hub (HTTP, gate, JSONL, the tree): posts/s, its CPU us per post, tree size."""
    society = Society(folder / "home")
    hub = society.start_hub()
    try:
        before = _cpu_seconds(hub.pid)
        rate = post_rate(society, clients, per_client, signed=True)
        cpu = (_cpu_seconds(hub.pid) - before) / (clients * per_client) * 1e6
    finally:
        society.stop_all()
    tree = Tree(folder / "home" / "room" / "room.jsonl.tlog", readonly=True)
    size = tree.size
    tree.close()
    return rate, cpu, size


def provable_delays(folder: Path, posts: int) -> list[float]:
    """Seconds from a post's answer to a signed checkpoint that covers it, on a real hub with
    the configuration `bullpen init` lays down (posts spaced so each waits on its own)."""
    import httpx

    society = Society(folder / "provable")
    society.start_hub()
    delays = []
    try:
        with httpx.Client(base_url=society.strict_url, timeout=10) as client:
            headers = society.read_headers()
            for i in range(posts):
                body = {"from": "visitor", "to": "@echo", "type": "chat", "body": f"p {i}"}
                seq = client.post("/say", json=body).json()["seq"]
                began = time.monotonic()
                while True:
                    text = client.get("/tlog/checkpoint", headers=headers).text
                    if int(text.split("\n")[1]) >= seq:
                        break
                    time.sleep(0.01)
                delays.append(time.monotonic() - began)
    finally:
        society.stop_all()
    return delays


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="2 x 10^4 lines, fewer posts and rounds"
    )
    args = parser.parse_args()
    lines = 2 * 10**4 if args.quick else 10**6
    samples = 100 if args.quick else 1000
    posts, rounds = (800, 3) if args.quick else (10000, 9)
    with tempfile.TemporaryDirectory(prefix="bullpen-bench-tlog-") as tmp:
        folder = Path(tmp)
        tree, built = build_tree(folder, lines)
        measured = proofs(tree, samples)
        tree.close()
        without, with_tree = append_rates(folder, posts, rounds)
        hub_rate, hub_cpu, hub_tree = real_hub(folder, 8, posts // 8)
        delays = provable_delays(folder, 3 if args.quick else 60)  # each waits ~1 s to be signed
        assert hub_tree == posts // 8 * 8, hub_tree
    bound = math.ceil(math.log2(lines))
    rows = [["measure", "value", "against", "ratio"]]
    rows.append(
        ["tree build (lines/s)", f"{lines / built:,.0f}", f"{lines:,} lines", f"{built:.1f} s"]
    )
    for kind, name in (("inc", "inclusion"), ("con", "consistency")):
        longest = max(measured[f"{kind}_len"])
        rows.append(
            [
                f"{name} proof at {lines:,} (hashes)",
                f"max {longest:.0f}, {longest * 32:.0f} B",
                f"log2 n = {bound}" + (" (x2 bound)" if kind == "con" else ""),
                f"{longest / bound:.2f}",
            ]
        )
        for step in ("make", "check"):
            values = measured[f"{kind}_{step}"]
            rows.append(
                [
                    f"  {name} {step} (us)",
                    f"p50 {percentile(values, 0.5):.0f}  p99 {percentile(values, 0.99):.0f}",
                    f"{samples} random",
                    "",
                ]
            )
    base = statistics.median(rate for rate, _ in without)
    kept = statistics.median(rate for rate, _ in with_tree)
    paired = statistics.median(b[0] / a[0] for a, b in zip(without, with_tree, strict=True))
    cpu_base = statistics.median(cpu for _, cpu in without)
    cpu_kept = statistics.median(cpu for _, cpu in with_tree)
    rows.append(
        [
            "appends/s, tree kept",
            f"{kept:,.0f}",
            f"{base:,.0f} without",
            f"{paired:.1%} (median of rounds; goal >= 95%)",
        ]
    )
    rows.append(
        [
            "  CPU per append (us)",
            f"{cpu_kept:.0f} with the tree",
            f"{cpu_base:.0f} without",
            f"{cpu_base / cpu_kept:.1%} of the rate the CPU allows",
        ]
    )
    per_line = built / lines * 1e6
    rows.append(
        [
            "  the tree's own cost (us/line)",
            f"{per_line:.1f}",
            f"{1e6 / base:.0f} us/post",
            f"{1 - per_line / (1e6 / base):.1%} left for posts",
        ]
    )
    rows.append(
        [
            "real hub (HTTP, gate, tree) posts/s",
            f"{hub_rate:,.0f}",
            f"{hub_cpu:.0f} us CPU/post",
            f"tree {per_line / hub_cpu:.1%} of it: >= {1 - per_line / hub_cpu:.1%} kept",
        ]
    )
    rows.append(
        [
            "post to provable (s)",
            f"p50 {percentile(delays, 0.5):.2f}  max {max(delays):.2f}",
            f"{len(delays)} posts, one at a time",
            "checkpoint_interval_s = 1",
        ]
    )
    rows.append(
        [
            "  each round (without / with)",
            " ".join(f"{a[0]:,.0f}/{b[0]:,.0f}" for a, b in zip(without, with_tree, strict=True)),
            f"{posts:,} posts, 64 posters",
            "",
        ]
    )
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

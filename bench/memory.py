"""Benchmark shared memory: recall, save -> searchable, and what lessons add to a wake.

    python bench/memory.py            # 100,000 entries, 2,000 recalls, 50 saves, 300 wakes
    python bench/memory.py --quick    # 5,000 entries, 200 recalls, 5 saves, 30 wakes of 5 lurkers

The entries (50 namespaces, 20 of them nicks' lessons) are indexed straight
into SQLite through the index's own code; the save -> searchable latency
goes through the room (a post to @librarian until the entry is in the
index). Wake latency (the hub's ack to the handler's start, as in
bench/lurkers.py) is measured for 20 lurkers in one run twice: first with
no index (each wake recalls nothing), then with the full index in place.
Goals: recall p99 <= 5 ms; lessons add <= 2 ms p99 to a wake; the index
<= 2x the entries' text.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agents.memory.entry import Save  # noqa: E402
from agents.memory.index import Index  # noqa: E402
from agents.memory.lessons import RETRY_S, wake_lessons  # noqa: E402
from agents.memory.namespaces import index_path  # noqa: E402
from bench.lurkers import NICKS, measure_latency  # noqa: E402
from bench.table import percentile, print_table  # noqa: E402
from room.message import Post  # noqa: E402
from tests.support import Society, add_nick, wait_for  # noqa: E402
from trust.proof import SecretSigner  # noqa: E402

FIRST_SEQ = 10_000_000
NAMESPACES = [
    *(f"/bullpen/lessons-learned/{nick}" for nick in NICKS),
    "/bullpen/lessons-learned",
    "/bullpen/ops",
    "/bullpen/sandbox",
    "/bullpen/research",
    "/bullpen/artifacts",
    *(f"/bullpen/ops/area{n}" for n in range(25)),
]


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)]


def sentence(rng: random.Random, words: list[str]) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(12, 40)))


def fill(path: Path, count: int, rng: random.Random, words: list[str]) -> int:
    """`count` entries straight into the index; the bytes of their text."""
    index = Index.open(path)
    text_bytes = 0
    with index.writing():
        for seq in range(FIRST_SEQ, FIRST_SEQ + count):  # far past the bench room's own seqs
            ns = NAMESPACES[seq % len(NAMESPACES)]
            text = sentence(rng, words)
            text_bytes += len(text.encode())
            save = Save(ns=ns, text=text, source=f"bench {seq}")
            index.add(seq, f"bench-{seq}", "operator", "2026-12-01T00:00:00.000Z", save, ns)
    index.optimize()  # as `bullpen memory rebuild` leaves it
    index.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    index.close()
    return text_bytes


def size_split(path: Path) -> tuple[int, int]:
    """The file's bytes in the entries table itself, and in everything built to search it."""
    with sqlite3.connect(path) as db:
        pages = dict(db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
    stored = pages.pop("entries")
    return stored, sum(pages.values())


def recall_times(
    path: Path, count: int, rng: random.Random, words: list[str]
) -> dict[str, list[float]]:
    """Milliseconds per lesson recall (8 own + 2 general), and per plain newest-in-ns read."""
    index = Index.open(path, create=False)
    lessons, plain, cpu = [], [], []
    for n in range(count):
        nick = NICKS[n % len(NICKS)]
        text = sentence(rng, words)
        started, used = time.perf_counter(), time.process_time()
        wake_lessons(index, nick, text)
        lessons.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - used) * 1000)
        started = time.perf_counter()
        index.recall(None, f"/bullpen/lessons-learned/{nick}", 8)
        plain.append((time.perf_counter() - started) * 1000)
    index.close()
    return {"lessons": lessons, "plain": plain, "cpu": cpu}


def save_to_searchable(society: Society, count: int) -> list[float]:
    """Milliseconds from posting a save to @librarian until recall finds it."""
    signer = SecretSigner(society.secret())
    times = []
    reader = Index.open(index_path(society.home), create=False)
    with reader, httpx.Client(base_url=society.strict_url, timeout=10) as client:
        for n in range(count):
            word = f"zq{n}marker"
            save = {"ns": "/bullpen/ops", "text": f"{word} searchable"}
            payload = {"from": "operator", "to": "@librarian", "type": "ask", "body": word}
            payload["data"] = {"save": save}
            payload.update(signer.prove(Post.model_validate(payload)))
            started = time.perf_counter()
            assert client.post("/say", json=payload).status_code == 200
            wait_for(lambda w=word: reader.recall(f'"{w}"', "/bullpen", 1), 20, word)
            times.append((time.perf_counter() - started) * 1000)
    return times


def row(name: str, values: list[float]) -> tuple[str, str]:
    return (name, f"p50 {percentile(values, 0.5):.3f} ms  p99 {percentile(values, 0.99):.3f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    entries, recalls, saves, wakes = (5_000, 200, 5, 30) if args.quick else (100_000, 2000, 50, 300)
    rng = random.Random(16)
    words = vocabulary(rng)
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bullpen-bench-memory-") as tmp:
        built = Path(tmp) / "built.sqlite"
        started = time.perf_counter()
        text_bytes = fill(built, entries, rng, words)
        rows.append(
            (
                f"index {entries:,} entries, {len(NAMESPACES)} namespaces",
                f"{time.perf_counter() - started:.1f} s",
            )
        )
        size = built.stat().st_size
        rows.append(
            (
                "index size / entries' text",
                f"{size / 2**20:.1f} MiB / {text_bytes / 2**20:.1f} MiB = {size / text_bytes:.2f}x (goal <= 2x)",
            )
        )
        stored, search = size_split(built)
        rows.append(
            (
                "  of it: the entries (text + provenance)",
                f"{stored / 2**20:.1f} MiB = {stored / text_bytes:.2f}x",
            )
        )
        rows.append(
            (
                "  of it: the search structures (FTS5, b-trees)",
                f"{search / 2**20:.1f} MiB = {search / text_bytes:.2f}x",
            )
        )
        times = recall_times(built, recalls, rng, words)
        rows.append(row("recall for a wake (8 own + 2 general)", times["lessons"]))
        rows.append(row("  the same, CPU time of this process", times["cpu"]))
        rows.append(row("baseline: newest 8 in a namespace", times["plain"]))
        ratio = percentile(times["lessons"], 0.99) / percentile(times["plain"], 0.99)
        rows.append(("recall p99 / baseline p99", f"{ratio:.1f}x (goal: recall p99 <= 5 ms)"))

        society = Society(Path(tmp) / "home")
        woken = NICKS[:5] if args.quick else NICKS  # each lurker's start costs a second or so
        for nick in woken:
            add_nick(society.root, nick, handler="bench.steps:amark")
        marks = Path(tmp) / "marks"
        env = {"BULLPEN_BENCH_MARKS": str(marks), "PYTHONPATH": str(REPO)}
        society.start_hub()
        try:
            lurkers = [society.start_lurker(nick, env=env) for nick in woken]
            signer = SecretSigner(society.secret())
            measure_latency(society, signer, woken, 20, marks, 10)  # warm up
            bare, _ = measure_latency(society, signer, woken, wakes, marks, 10)
            live = index_path(society.home)
            shutil.copy(built, live)
            time.sleep(RETRY_S + 0.5)  # a lurker with no index tries again every RETRY_S
            measure_latency(society, signer, woken, 20, marks, 10)
            told, _ = measure_latency(society, signer, woken, wakes, marks, 10)
            bare_ms = [v * 1000 for v in bare]
            told_ms = [v * 1000 for v in told]
            rows.append(row(f"wake, {len(woken)} lurkers, no index (no lessons)", bare_ms))
            rows.append(row(f"wake, {len(woken)} lurkers, lessons from {entries:,}", told_ms))
            added = percentile(told_ms, 0.99) - percentile(bare_ms, 0.99)
            rows.append(("lessons add to a wake, p99", f"{added:+.2f} ms (goal <= 2 ms)"))
            for lurker in lurkers:
                lurker.stop()
            society.start_lurker("librarian")
            save_to_searchable(society, 3)  # warm up
            rows.append(
                row("save -> searchable, through the room", save_to_searchable(society, saves))
            )
        finally:
            society.stop_all()
    with open("/proc/loadavg") as load:
        rows.append(("load average during the run (2 cores)", load.read().split()[0]))
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

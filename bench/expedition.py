"""Benchmark one expedition over a generated 5,000-row index, through the room.

    python bench/expedition.py            # 5,000 rows
    python bench/expedition.py --rows N   # another size
    python bench/expedition.py --quick    # 300 rows: a smoke check

A real hub and real lurkers run under `bullpen up` with the built-in local
seat; the operator's `bullpen expedition --yes` is timed from the first ask
to the final report. From the lurkers' own log lines (`handled` with
handler_ms, `seat.attempt` with elapsed_ms) the wall time splits into the
seats, the steps' own work, and what is left: orchestration — posting,
fsync, waking, reading the thread — per room hop.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.table import print_table  # noqa: E402
from tests.fakes.expedition_model import TERMS  # noqa: E402
from tests.support import Society, start_up  # noqa: E402

WORDS = [
    "kiln",
    "glaze",
    "clay",
    "wheel",
    "apprentice",
    "mortar",
    "lime",
    "brick",
    "sourdough",
    "starter",
    "dough",
    "oven",
    "bench",
    "plane",
    "chisel",
    "dovetail",
    "clamp",
    "glue",
    "drawer",
    "hive",
    "swarm",
    "queen",
    "garden",
    "compost",
    "seed",
    "frost",
    "soil",
    "orchard",
    "graft",
    "bark",
    "river",
    "boat",
    "net",
    "rope",
    "knot",
    "sail",
    "tide",
    "ledger",
    "invoice",
    "client",
    "deadline",
    "meeting",
    "draft",
    "sketch",
    "canvas",
    "pigment",
    "brush",
    "loom",
    "yarn",
    "weave",
    "dye",
    "spindle",
    "forge",
    "anvil",
    "tongs",
    "quench",
    "temper",
]
SLOW = TERMS  # the words the fake model searches for: some rows must hold them


def _summary(rng: random.Random, n: int) -> tuple[str, str]:
    words = rng.sample(WORDS, 8)
    if n % 17 == 0:
        words += ["patience"]
    if n % 11 == 0:
        words += rng.sample(SLOW, 2)
    rng.shuffle(words)
    summary = "Notes on " + ", ".join(words[:6]) + " and " + " ".join(words[6:]) + "."
    keypoints = "; ".join(rng.sample(WORDS, 3))
    return summary, keypoints


def generate_kb(root: Path, rows: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    (root / "notes").mkdir(parents=True)
    lines = [
        "# Corpus index",
        "",
        "| file | summary | keypoints | tags | category | archetype | monomyth |",
        "|---|---|---|---|---|---|---|",
    ]
    for n in range(1, rows + 1):
        summary, keypoints = _summary(rng, n)
        name = f"notes/note-{n:05d}.md"
        lines.append(f"| {name} | {summary} | {keypoints} | craft | Craft | Maker | 06 - Tests |")
        role = "lived" if n % 3 else "guidance"
        paragraphs = [
            " ".join(["I", *rng.choices(WORDS + SLOW, k=60), "and my hands remembered the work."])
            for _ in range(4)
        ]
        body = "\n\n".join(paragraphs)
        (root / name).write_text(
            f'---\nsummary: "{summary}"\nrole: {role}\n---\n\n{body}\n', encoding="utf-8"
        )
    (root / "corpus_index.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _events(log: Path) -> list[dict[str, object]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def _epoch(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--quick", action="store_true", help="300 rows, a smoke check")
    args = parser.parse_args()
    if args.quick:
        args.rows = min(args.rows, 300)
    with tempfile.TemporaryDirectory(prefix="bullpen-bench-") as tmp:
        society = Society(Path(tmp) / "home")
        generate_kb(society.root / "kb", args.rows)
        up = start_up(society, ready=True)
        try:
            started = time.perf_counter()
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "agents.cli",
                    "--home",
                    str(society.root),
                    "expedition",
                    "--title",
                    "Waiting Is Part of the Work",
                    "--keyword",
                    "patience",
                    "--yes",
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            wall = time.perf_counter() - started
        finally:
            up.stop()
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:])
            return 1
        lines = society.lines()
        thread = next(m["thread"] for m in lines if m["to"] == "@foreman")
        run = [m for m in lines if m["thread"] == thread]
        run_span = _epoch(run[-1]["ts"]) - _epoch(run[0]["ts"])
        seat_ms = handler_ms = 0.0
        for log in (society.root / "logs").glob("*.log"):
            if log.stem in ("hub", "foreman"):
                continue
            for event in _events(log):
                if event.get("event") == "seat.attempt":
                    seat_ms += float(event.get("elapsed_ms", 0))  # type: ignore[arg-type]
                if event.get("event") == "handled":
                    handler_ms += float(event.get("handler_ms", 0))  # type: ignore[arg-type]
        hops = len(run)
        overhead_s = run_span - handler_ms / 1000
        rows = [
            ("index rows", f"{args.rows:,}"),
            ("command wall time (process start to brief)", f"{wall:.2f} s"),
            ("run span in the room (first ask to final report)", f"{run_span:.2f} s"),
            ("room messages in the run (hops)", str(hops)),
            ("time in seats (model calls, local)", f"{seat_ms / 1000:.2f} s"),
            ("time in step handlers (incl. seats)", f"{handler_ms / 1000:.2f} s"),
            (
                "orchestration (span - handlers)",
                f"{overhead_s:.2f} s ({overhead_s / run_span:.0%})",
            ),
            ("orchestration per room hop", f"{overhead_s / hops * 1000:.1f} ms"),
        ]
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark a one-host build end to end, to see what the cross-host hand-on costs there.

    python bench/handoff.py               # 6 builds and the hand-ons alone: a table
    python bench/handoff.py --builds 3    # fewer
    python bench/handoff.py --quick       # 1 build, 3 hand-ons: that the bench still runs

A real hub, foreman, @sandbox, @testdesigner and @py on one host sharing one build
root; a fake code seat (tests/fakes/fake_coder.py, mode copy) writes the fix in one
iteration. Each build is `bullpen build TICKET` in a subprocess, on a fresh campaign
folder; the figure is its wall time, first build left out (warm-up). Run it from two
trees (this one and the one before the hand-on landed, PYTHONPATH pointing at each) to
compare: on one host the spec step bundles the build dir and the grind the green clone
(two PUTs), and nothing is fetched, since every path is under the one build root. The table
sets the two hand-ons, timed alone in-process, against the build's wall time (the baseline,
measured in the same run), so the ratio is what they add to a one-host build.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.build.helpers import PY_FIX, PY_SPEC, calc_ticket, fixing_society  # noqa: E402
from tests.support import Society, run_cli  # noqa: E402


def builds(count: int) -> list[float]:
    """Wall times of `count` one-host builds (seconds), after one warm-up build."""
    with tempfile.TemporaryDirectory(prefix="bench-handoff-") as folder:
        base = Path(folder)
        root = base / "builds"
        society = fixing_society(base, root)
        try:
            times = []
            for number in range(count + 1):
                path = calc_ticket(base, root, f"calc{number}")
                started = time.perf_counter()
                done = run_cli(society.root, "build", str(path), "--wait-timeout", "200",
                               timeout=240)  # fmt: skip
                took = time.perf_counter() - started
                if done.returncode != 0:
                    raise SystemExit(f"build {number} was not green:\n{done.stdout}{done.stderr}")
                if number:
                    times.append(took)
                print(f"build {number}: {took:.2f} s", flush=True)
            return times
        finally:
            society.stop_all()


def parts(repeats: int = 10) -> dict[str, float]:
    """The two hand-ons of a one-host build, alone: median ms each."""
    from agents.build.handoff import hand_on
    from agents.git.safe import git

    with tempfile.TemporaryDirectory(prefix="bench-handoff-") as folder:
        base = Path(folder)
        society = Society(base / "home")
        try:
            society.start_hub()
            repo = base / "calc"
            (repo / "tests").mkdir(parents=True)
            (repo / "tests/test_calc.py").write_text(PY_SPEC)
            (repo / "calc.py").write_text(PY_FIX)
            git(repo, "init", "-q")
            git(repo, "add", "-A")
            git(repo, "commit", "-qm", "baseline", identity=True)
            took = []
            for _ in range(repeats):
                started = time.perf_counter()
                asyncio.run(hand_on(society.home, "testdesigner", "spec", repo))
                took.append((time.perf_counter() - started) * 1000)
            return {"hand_on (bundle + PUT) p50 ms": statistics.median(took)}
        finally:
            society.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--builds", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="1 build, 3 hand-ons")
    parser.add_argument("--parts", action="store_true", help="(kept for old scripts: always on)")
    args = parser.parse_args()
    times = builds(1 if args.quick else args.builds)
    build = statistics.median(times)
    hand_on_ms = next(iter(parts(3 if args.quick else 10).values()))
    rows = [
        ("one-host build, wall (median)", f"{build:.2f} s", "baseline"),
        ("one hand-on: bundle + PUT (median)", f"{hand_on_ms:.1f} ms", ""),
        (
            "the build's two hand-ons",
            f"{2 * hand_on_ms:.1f} ms",
            f"{2 * hand_on_ms / 10 / build:.1f} % of the build",
        ),
    ]
    print(f"{'measure':<40}{'value':>12}  vs baseline")
    for name, value, ratio in rows:
        print(f"{name:<40}{value:>12}  {ratio}")


if __name__ == "__main__":
    main()

"""Run every benchmark in its --quick mode, so none of them rots unnoticed.

    python bench/quick.py             # all of them, one after another
    python bench/quick.py room web    # only these

CI runs this after the test suite. Figures are not judged here (a CI machine is
not an idle machine); what is judged is that each bench still runs to its table
and exits 0. Each bench's output is shown as it comes, under a header with its
name, and the summary at the end says which failed and how long each took.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent

# Each entry is a bench with a --quick mode. tests/test_bench_list.py fails when a
# bench/*.py with a main() is missing here, so a new bench cannot be left out.
BENCHES = (
    "room",
    "poststages",
    "lurkers",
    "society",
    "screen",
    "tlog",
    "flood",
    "jetstream",
    "gateway",
    "memory",
    "web",
    "expedition",
    "backpass",
    "build",
    "fixexisting",
    "foreman_junk",
    "telemetry",
    "handoff",
)
# Programs the benches start, not benches themselves.
HELPERS = frozenset(
    {
        "flood_client",
        "gateway_client",
        "instant_backend",
        "load_client",
        "naive_lurker",
        "steps",
        "table",
        "quick",
        "__init__",
    }
)
TIME_LIMIT_S = 900  # one bench's quick run; past this it is stuck, not slow


def run_one(name: str) -> tuple[str, float, int]:
    print(f"\n=== bench/{name}.py --quick", flush=True)
    started = time.monotonic()
    try:
        code = subprocess.run(
            [sys.executable, str(BENCH / f"{name}.py"), "--quick"], timeout=TIME_LIMIT_S
        ).returncode
    except subprocess.TimeoutExpired:
        print(f"bench/{name}.py --quick ran past {TIME_LIMIT_S} s and was stopped", flush=True)
        code = -1
    return name, time.monotonic() - started, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "names", nargs="*", help=f"benches to run (default: all: {', '.join(BENCHES)})"
    )
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in BENCHES]
    if unknown:
        print(
            f"unknown bench {', '.join(unknown)}: choose from {', '.join(BENCHES)}", file=sys.stderr
        )
        return 2
    results = [run_one(name) for name in args.names or BENCHES]
    print("\n=== quick benches")
    for name, seconds, code in results:
        print(f"{name:<14} {seconds:7.1f} s  {'ok' if code == 0 else f'FAILED (exit {code})'}")
    failed = [name for name, _, code in results if code != 0]
    if failed:
        print(
            f"{len(failed)} of {len(results)} benches failed: {', '.join(failed)}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

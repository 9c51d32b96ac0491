"""Benchmark the backpass: 43 traces, a bulk model taking 1 s per call, 4 in flight.

    python bench/backpass.py            # 43 traces, 4 in flight
    python bench/backpass.py --quick    # 8 traces: a smoke check that the bench still runs

A real hub and lurkers under `bullpen up`; the bulk and synthesis roles are
`openai` seats served by tests/fakes/fake_openai.py, which answers each
analysis after exactly 1 s. The wall time of `bullpen backpass --report-only` is compared
with the ideal: ceil(43 / 4) × 1 s for the analyses plus the synthesis
call. A second run with an instant model gives the driver's own cost per
trace: everything that is not a model call.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.expedition import _epoch  # noqa: E402
from bench.table import print_table  # noqa: E402
from tests.fakes.fake_openai import FakeOpenAI  # noqa: E402
from tests.support import Society, set_seat, start_up  # noqa: E402


def make_traces(folder: Path, count: int) -> None:
    for old in folder.rglob("*"):
        if old.is_file():
            old.unlink()
    for n in range(count):
        lines = [f"Session {n}: we shipped the fix & it worked after the retry."]
        lines += [
            f"Note {k}: the build took {k} minutes; $1 and \\1 stayed literal." for k in range(40)
        ]
        (folder / f"trace-{n:02d}.md").write_text("\n".join(lines) + "\n")


def run(count: int, delay_s: float, concurrency: int) -> tuple[float, float, float, float]:
    """(wall seconds of the command, seconds from the ask to the final report in the room,
    seconds of the synthesis call, mean seconds per bulk call).

    The bulk model is an OpenAI-compatible HTTP server answering after `delay_s`:
    each call costs the model's time and nothing else (no process to start).
    """
    answer = {
        "positive": [{"text": "retrying works", "quote": "it worked after the retry."}],
        "negative": [],
        "gaps": [],
    }
    synthesis = {"edits": [], "summary": "none"}
    with (
        tempfile.TemporaryDirectory(prefix="bullpen-bench-") as tmp,
        FakeOpenAI(
            {"analysis": {"delay": delay_s, "json": answer}, "synthesis": {"json": synthesis}}
        ) as server,
    ):
        society = Society(Path(tmp) / "home", demo=True)
        make_traces(society.root / "traces", count)
        for role in ("bulk", "synthesis"):
            set_seat(
                society.root,
                role,
                f'kind = "openai"\nbase_url = "{server.base_url}"\nmodel = "fake"\ntimeout_s = 60',
            )
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
                    "backpass",
                    "--report-only",
                    "--concurrency",
                    str(concurrency),
                ],
                capture_output=True,
                text=True,
                timeout=900,
            )
            wall = time.perf_counter() - started
        finally:
            up.stop()
        if done.returncode != 0:
            raise SystemExit(f"the backpass failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        calls: dict[str, list[float]] = {"synthesizer": [], "analyst": []}
        for nick, found in calls.items():
            for line in (society.root / "logs" / f"{nick}.log").read_text().splitlines():
                event = json.loads(line)
                if event.get("event") == "seat.attempt":
                    found.append(float(event.get("elapsed_ms", 0)) / 1000)
        lines = society.lines()
        span = _epoch(lines[-1]["ts"]) - _epoch(lines[0]["ts"])
        per_call = sum(calls["analyst"]) / max(1, len(calls["analyst"]))
        return wall, span, sum(calls["synthesizer"]), per_call


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=43)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="8 traces, a smoke check")
    args = parser.parse_args()
    if args.quick:
        args.traces = min(args.traces, 8)
    slow_wall, slow_span, synthesis, per_call = run(args.traces, 1.0, args.concurrency)
    ideal = math.ceil(args.traces / args.concurrency) * 1.0 + synthesis
    _, fast_span, fast_synthesis, _ = run(args.traces, 0.0, args.concurrency)
    per_trace_ms = (fast_span - fast_synthesis) / args.traces * 1000
    rows = [
        ("traces, concurrency", f"{args.traces}, {args.concurrency}"),
        ("ideal: ceil(traces/concurrency) × 1 s + synthesis", f"{ideal:.2f} s"),
        (
            "run in the room (ask to funnel), 1 s model",
            f"{slow_span:.2f} s ({(slow_span - ideal) / ideal:+.1%})",
        ),
        (
            "command wall time incl. its start-up",
            f"{slow_wall:.2f} s ({(slow_wall - ideal) / ideal:+.1%})",
        ),
        ("mean bulk call as the seat saw it", f"{per_call:.3f} s"),
        ("run in the room, instant model", f"{fast_span:.2f} s"),
        ("driver's own time per trace (instant model)", f"{per_trace_ms:.0f} ms"),
    ]
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the society's footprint: what `bullpen up` costs in memory and time to ready.

    python bench/society.py            # a fresh home's whole society, 5 import samples
    python bench/society.py --quick    # the same society, 2 import samples, 4 lone lurkers

A fresh home from `bullpen init` (every nick of the default society) is started
with `bullpen up`; the time to "lurkers up" (every lurker listening) is taken
from the moment the command starts. Once the room is quiet, each process of the
society is read from /proc: RSS, PSS (its fair share of pages it shares) and
USS (its own pages). The baseline, measured in the same run, is a bare
interpreter that imports asyncio and waits: no lurker can cost less than that.
Import time is the CPU a fresh interpreter spends importing what a lurker
imports before it listens (the command line and the idle loop,
agents/runtime/lean.py) and what its first wake loads (the full lurker), beside
the bare `import asyncio`.

Under `up` the lurkers are forked from one zygote (agents/runtime/zygote.py) and
share its pages, so they are found by the pids in `state/up.json`, not by their
command line. A lone lurker (`bullpen lurk echo` beside a hub, as a systemd
unit runs it) is measured after `up` stops: the figure the lazy loading alone
must bring down (agents/runtime/lean.py: it idles on the stdlib). Then every nick
of the society is started that way at once, as their systemd units run: each
pays for its own interpreter, but the interpreter's file pages are shared
between them, so each one's PSS is below the lone lurker's.

Goals (issue 26): one idle lurker ≤ 15 MB PSS, a 20-nick society ≤ 300 MB PSS
in all, ready ≤ 2 s on an idle machine.
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import json  # noqa: E402

from bench.lurkers import memory_kb  # noqa: E402 - RSS, PSS and USS of one process
from bench.table import print_table  # noqa: E402
from tests.support import Society, wait_for  # noqa: E402

BARE = "import asyncio, sys; sys.stdout.write('ready\\n'); sys.stdout.flush(); asyncio.run(asyncio.sleep(3600))"
LURKER_MODULE = "agents.runtime.lurker"  # the full lurker: what a first wake loads
LEAN_MODULE = "agents.runtime.lean"  # the idle loop: what a lurker loads to listen


def session_members(sid: int) -> dict[int, str]:
    """Every live process in session `sid`, with its command line."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) != sid:
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ProcessLookupError):
            continue
    return found


def bare_interpreter() -> dict[str, int]:
    proc = subprocess.Popen([sys.executable, "-c", BARE], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return memory_kb(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def import_cpu_s(code: str, samples: int) -> float:
    """Median CPU seconds (user + sys) a fresh interpreter spends running `code`."""
    times = []
    for _ in range(samples):
        before = os.times()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
        after = os.times()
        times.append(
            (after.children_user - before.children_user)
            + (after.children_system - before.children_system)
        )
    return statistics.median(times)


def lone_lurkers(society: Society, nicks: list[str]) -> dict[str, dict[str, int]]:
    """Lurkers started each on its own beside a hub (as their systemd units run), all at
    once, measured once listening: how much each holds when nothing forked them."""
    try:
        society.start_hub()
        lurkers = {nick: society.start_lurker(nick) for nick in nicks}
        # Settle as the society did: the first reads and the idle loop's lazy imports.
        time.sleep(2.0)  # a settling window, not a wait for a condition: nothing to poll
        return {nick: memory_kb(proc.pid) for nick, proc in lurkers.items()}
    finally:
        society.stop_all()


def mb(kb: float) -> str:
    return f"{kb / 1024:.1f} MB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="2 import samples, not 5; 4 lone lurkers, not all"
    )
    args = parser.parse_args()
    samples = 2 if args.quick else 5
    bare = bare_interpreter()
    bare_import = import_cpu_s("import asyncio", samples)
    lurker_import = import_cpu_s(f"import {LURKER_MODULE}", samples)
    lean_import = import_cpu_s(f"import agents.cli, {LEAN_MODULE}", samples)
    with tempfile.TemporaryDirectory(prefix="bullpen-bench-society-") as tmp:
        society = Society(Path(tmp) / "home")
        nicks = list(society.home.society.nicks)
        started = time.monotonic()
        up = society.spawn("up", "up")
        try:
            wait_for(lambda: "lurkers up" in up.output() or not up.alive(), 120, "bullpen up")
            ready_s = time.monotonic() - started
            assert up.alive(), up.output()
            members = session_members(up.pid)
            # Let start-up settle (first reads, lazy imports of the idle loop) before measuring.
            time.sleep(2.0)  # a settling window, not a wait for a condition: nothing to poll
            memory = {pid: memory_kb(pid) for pid in members if Path(f"/proc/{pid}").exists()}
            pids = json.loads((society.root / "state" / "up.json").read_text())["pids"]
            lurker_pids = {pid for name, pid in pids.items() if name in nicks}
        finally:
            society.stop_all()
        lone = lone_lurkers(society, ["echo"])["echo"]
        units = lone_lurkers(society, nicks[:4] if args.quick else nicks)
    lurkers = [m for pid, m in memory.items() if pid in lurker_pids]
    total = {k: sum(m[k] for m in memory.values()) for k in ("rss", "pss", "uss")}
    one = {k: statistics.median(m[k] for m in lurkers) for k in ("rss", "pss", "uss")}
    unit_pss = sorted(m["pss"] for m in units.values())
    rows = [
        ("measure", "value", "vs baseline"),
        ("bare interpreter (asyncio, waiting): PSS", mb(bare["pss"]), "baseline"),
        ("one idle lurker: PSS", mb(one["pss"]), f"{one['pss'] / bare['pss']:.2f}x (goal ≤ 15 MB)"),
        ("one idle lurker: RSS", mb(one["rss"]), f"{one['rss'] / bare['rss']:.2f}x"),
        ("one idle lurker: USS", mb(one["uss"]), f"{one['uss'] / max(bare['uss'], 1):.2f}x"),
        (
            "one lone lurker (echo, started alone): PSS",
            mb(lone["pss"]),
            f"{lone['pss'] / bare['pss']:.2f}x (goal ≤ 15 MB)",
        ),
        ("one lone lurker: RSS", mb(lone["rss"]), f"{lone['rss'] / bare['rss']:.2f}x"),
        ("one lone lurker: USS", mb(lone["uss"]), f"{lone['uss'] / max(bare['uss'], 1):.2f}x"),
        (
            f"{len(units)} lone lurkers at once (one systemd unit per nick): PSS each, median",
            mb(statistics.median(unit_pss)),
            f"{statistics.median(unit_pss) / bare['pss']:.2f}x (max {mb(unit_pss[-1])})",
        ),
        (f"{len(units)} lone lurkers at once: PSS in all", mb(sum(unit_pss)), ""),
        (
            f"society: {len(memory)} processes ({len(lurkers)} lurkers of {len(nicks)} nicks), PSS",
            mb(total["pss"]),
            f"{total['pss'] / bare['pss']:.1f}x bare (goal ≤ 300 MB)",
        ),
        ("society: RSS", mb(total["rss"]), ""),
        ("time to 'lurkers up'", f"{ready_s:.2f} s", "goal ≤ 2 s"),
        ("import asyncio (CPU)", f"{bare_import * 1e3:.0f} ms", "baseline"),
        (
            f"import agents.cli, {LEAN_MODULE} (CPU): the idle loop",
            f"{lean_import * 1e3:.0f} ms",
            f"{lean_import / bare_import:.1f}x",
        ),
        (
            f"import {LURKER_MODULE} (CPU): the first wake's load",
            f"{lurker_import * 1e3:.0f} ms",
            f"{lurker_import / bare_import:.1f}x",
        ),
    ]
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`bullpen runs` and `bullpen runs show THREAD`: the society's runs, read back from the room.

Each run is rebuilt from its thread by the same function the web view's runs page uses
(agents/web/runs.py, over the foreman's own Run), so the command, the page and the foreman
say the same about where a run is: waiting on whom, at the gate, done, failed at step N,
cancelled. Reading needs no lurker: the room file when this host has it, else the hub.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from agents.home import Home
from agents.web.cost import near_limit
from agents.web.runs import RunView, build_runs
from agents.wording import did_you_mean
from room.client import read_file
from room.errors import HubUnavailable, UsageError
from room.log import Filter

EXIT_OK, EXIT_UNKNOWN = 0, 2


async def room_lines(home: Home) -> list[dict[str, Any]]:
    """Every line of the room: from its file when this host has it, else over the hub.

    A home whose room was never started (no file, nothing beside it that says it held
    lines, no hub answering) has no runs yet: that is an answer, not an error."""
    local = home.society.room.engine == "jsonl"
    if local and home.room_path.exists():
        lines, _ = read_file(home.room_path, 0, None, Filter())
        return lines
    found: list[dict[str, Any]] = []
    after = 0
    try:
        async with home.client(home.society.operator) as client:
            while True:
                page, last = await client.read(after, 1000)
                found += page
                if len(page) < 1000 or last <= after:
                    return found
                after = last
    except HubUnavailable:
        from agents.cli.auditing import records_beside  # trust's audit: only for this answer

        if local and not records_beside(home.room_path):
            return []
        raise


NEVER_STARTED = " (the room was never started: `bullpen up` starts it)"


def _never_started(home: Home) -> bool:
    return home.society.room.engine == "jsonl" and not home.room_path.exists()


def all_runs(home: Home, lines: list[dict[str, Any]]) -> list[RunView]:
    threads: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        if line.get("thread"):
            threads.setdefault(str(line["thread"]), []).append(line)
    return build_runs(threads, home.trust.trusted, "foreman")


def _short(ts: Any) -> str:
    """`2026-12-04 14:03:07` from a room timestamp."""
    text = str(ts or "")
    return text[:19].replace("T", " ") if text else "-"


def _table(runs: list[RunView]) -> str:
    head = ("THREAD", "KIND", "STATE", "STARTED", "LAST", "CALLS", "TOKENS", "WHERE / TITLE")
    rows = [
        (
            run.thread,
            run.pipeline,
            run.state,
            _short(run.start.get("ts")),
            _short(run.last_ts),
            str(run.calls),
            "-" if run.tokens is None else str(run.tokens),
            f"{run.where} · {run.title}",
        )
        for run in runs
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in [head, *rows]
    )


def _show(run: RunView) -> str:
    lines = [
        f"{run.thread}  {run.pipeline}  {run.state}: {run.where}",
        f"asked by @{run.operator} at {_short(run.start.get('ts'))}: {run.title}",
        f"last activity {_short(run.last_ts)} · {run.calls} model call(s) · tokens "
        + ("- (no server counted any)" if run.tokens is None else str(run.tokens)),
    ]
    if run.forked_from is not None:
        lines.append(f"fork of {run.forked_from[0]} at seq {run.forked_from[1]}")
    if run.forks:
        lines.append(f"forked as {', '.join(run.forks)}")
    lines.append("steps:")
    for n, step in enumerate(run.steps, 1):
        took = f" {step.duration:.1f} s" if step.duration is not None else ""
        seat = f" seat {step.seat}" if step.seat else ""
        first = step.body.strip().splitlines()[0][:100] if step.body.strip() else ""
        lines.append(f"  {n:>2}. {step.state:<8} @{step.nick:<13} {step.key}{seat}{took}  {first}")
        lines += [f"      flag: {flag}" for flag in step.flags]
    if not run.steps:
        lines.append("  (none yet)")
    waiting = run.waiting_report()
    if waiting is not None:
        lines.append(
            f"waits at the gate for @{run.operator}: answer with `bullpen expedition confirm "
            f"{run.thread}` (or --drop/--redirect), or `bullpen cancel {run.thread}`"
        )
    elif run.state == "open":
        lines.append(f"stop it with `bullpen cancel {run.thread}`")
    final = run.final
    if final is not None:
        said = str(final.get("body", "")).strip().splitlines()
        lines.append(f"outcome: {said[0][:300] if said else run.state}")
    return "\n".join(lines)


def cmd_runs(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    runs = all_runs(home, asyncio.run(room_lines(home)))
    if getattr(args, "action", None) == "show":
        found = next((r for r in runs if r.thread == args.thread), None)
        if found is None:
            hint = did_you_mean(args.thread, [r.thread for r in runs])
            raise UsageError(
                f"no run has thread {args.thread!r} in this room{hint}; `bullpen runs` lists them"
            )
        if args.json:
            summary = found.summary()
            summary["steps"] = [
                {
                    "n": n,
                    "key": s.key,
                    "nick": s.nick,
                    "state": s.state,
                    "seat": s.seat,
                    "seconds": s.duration,
                    "flags": s.flags,
                }
                for n, s in enumerate(found.steps, 1)
            ]
            print(json.dumps(summary, ensure_ascii=False))
        else:
            print(_show(found))
        return EXIT_OK
    if args.state:
        runs = [r for r in runs if r.state in args.state]
    if args.kind:
        runs = [r for r in runs if r.pipeline in args.kind]
    if args.json:
        print(json.dumps([run.summary() for run in runs], ensure_ascii=False))
        return EXIT_OK
    if runs:
        print(_table(runs))
    else:
        print(
            "no run matches"
            if args.state or args.kind
            else "no run in the room yet" + (NEVER_STARTED if _never_started(home) else ""),
            file=sys.stderr,
        )
    near = near_limit(home)  # the gateway's budgets at 80% or more (agents/web/cost.py)
    if near:
        print("\nbudgets near their limit:\n" + "\n".join(f"  {line}" for line in near))
    return EXIT_OK

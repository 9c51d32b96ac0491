"""`bullpen replay THREAD --list | --step KEY [--seat NAME] [--fork] [--offline] [--json]`."""

from __future__ import annotations

import argparse
import asyncio
import json
import textwrap
from typing import Any

from agents.home import Home
from agents.replay import rerun, sandbox
from agents.replay.recorded import Recorded
from room import strictjson
from room.errors import UsageError

WIDTH = 38


def _list(home: Home, recorded: Recorded, as_json: bool) -> int:
    rows = [s.row() for s in recorded.steps if sandbox.why_not(home, s.nick) is None]
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    if not rows:
        print(f"the run {recorded.thread} has no answered step that can be replayed")
        return 0
    print(f"{'KEY':<16} {'NICK':<12} {'SEAT':<12} {'ASK':>6} {'ANSWER':>6}")
    for row in rows:
        print(
            f"{row['key']:<16} {row['nick']:<12} {row['seat'] or '-':<12} "
            f"{row['ask_seq']:>6} {row['answer_seq']:>6}"
        )
    return 0


def _column(title: str, answer: dict[str, Any], gate: dict[str, Any]) -> list[str]:
    verdict = (
        "pass"
        if gate["pass"]
        else "FAIL: " + "; ".join(f"{name}: {why}" for name, why in gate["failed"].items())
    )
    lines = [title, f"seat: {answer.get('seat') or '-'}", f"gates: {verdict}", ""]
    for paragraph in str(answer["body"]).splitlines() or [""]:
        lines += textwrap.wrap(paragraph, WIDTH) or [""]
    return [line for text in lines for line in textwrap.wrap(text, WIDTH) or [""]]


def print_side_by_side(result: dict[str, Any]) -> None:
    left = _column(
        f"recorded (seq {result['recorded']['seq']})",
        result["recorded"],
        result["gates"]["recorded"],
    )
    right = _column(
        f"replayed (seat {result['seat'] or 'configured'})",
        result["replayed"],
        result["gates"]["replayed"],
    )
    print(
        f"{result['thread']} step {result['step']} (@{result['nick']}, ask seq {result['ask_seq']})"
    )
    print("-" * (2 * WIDTH + 3))
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else ""
        b = right[i] if i < len(right) else ""
        print(f"{a:<{WIDTH}} | {b}")
    copy = result.get("copy")
    if copy:
        print("-" * (2 * WIDTH + 3))
        print(
            f"replayed against a private copy ({copy['files']} files, {copy['bytes']} bytes, "
            "removed after): " + (", ".join(c["path"] for c in copy["copied"]) or "nothing named")
        )
        for change in ("created", "changed", "rewritten", "deleted"):
            for path in copy["written"][change]:
                print(f"  {change:<9} {path}")
        if copy["would_post"]:
            print(f"  it would have posted {len(copy['would_post'])} line(s); none was posted")


async def _replay_all(home: Home, recorded: Recorded, args: argparse.Namespace) -> int:
    """Every replayable step in order (with --offline: the whole run, no backend asked)."""
    if args.fork:
        raise UsageError("--fork starts from one step: give --step KEY, not --all")
    results = []
    for step in recorded.steps:
        if sandbox.why_not(home, step.nick) is not None:
            continue
        judge = None
        if args.offline:
            from agents.replay.offline import offline_judge

            judge = offline_judge(home, step, args.seat)
        results.append(await rerun.replay(home, recorded, step.key, args.seat, judge))
    if args.json:
        print(strictjson.dumps(results))
        return 0
    print(f"{'KEY':<16} {'NICK':<12} {'RECORDED':<9} {'REPLAYED':<9} SAME ANSWER")
    for result in results:
        same = result["recorded"]["body"] == result["replayed"]["body"]
        verdicts = [
            "pass" if result["gates"][side]["pass"] else "FAIL" for side in ("recorded", "replayed")
        ]
        print(
            f"{result['step']:<16} {result['nick']:<12} {verdicts[0]:<9} {verdicts[1]:<9} "
            f"{'yes' if same else 'no'}"
        )
    return 0


# Options that cannot go together: each pair is refused, not one of them silently ignored.
_EXCLUSIVE = (("list", "step"), ("list", "fork"), ("list", "all"), ("all", "step"), ("all", "fork"))


def check_options(args: argparse.Namespace) -> None:
    """UsageError for options given together that cannot be (before anything is read)."""
    for one, other in _EXCLUSIVE:
        if getattr(args, one) and getattr(args, other):
            raise UsageError(
                f"--{one} and --{other} cannot go together: --list lists the steps, --step KEY "
                "replays one (--fork: and starts a new run from it), --all replays every step"
            )


async def _replay(args: argparse.Namespace) -> int:
    check_options(args)
    home = Home.at(args.home)
    home.require()
    recorded = await Recorded.load(home, args.thread)
    if args.list:
        return _list(home, recorded, args.json)
    if args.all:
        return await _replay_all(home, recorded, args)
    if not args.step:
        raise UsageError(
            "say what to do: --list the run's steps, --step KEY to replay one, or --all"
        )
    judge = None
    if args.offline:
        from agents.replay.offline import offline_judge

        judge = offline_judge(home, recorded.step(args.step), args.seat)
    if args.fork:
        from agents.replay.fork import fork

        return await fork(home, recorded, args.step, args.seat, judge, args.wait_timeout, args.json)
    result = await rerun.replay(home, recorded, args.step, args.seat, judge)
    if args.json:
        print(strictjson.dumps(result))
    else:
        print_side_by_side(result)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    return asyncio.run(_replay(args))

"""`bullpen eval SUITE [--seat NAME …] [--lessons on|off] [--json]`."""

from __future__ import annotations

import argparse
import json
import sys

from agents.evaluate.cases import load_suite, private_folders, suite_folder
from agents.evaluate.runners import NICKS, run_case
from agents.evaluate.scoreboard import SeatScore, render
from agents.evaluate.society import society
from agents.home import Home

EXIT_OK, EXIT_FAILED = 0, 1


def cmd_eval(args: argparse.Namespace) -> int:
    """Every case under every seat assignment; exit 1 when any case failed."""
    operator = Home.at(args.home)
    operator.require()
    cases = load_suite(args.suite)  # every case checked before anything starts
    lessons = args.lessons == "on"
    kinds = sorted({loaded.case.kind for loaded in cases})
    nicks = sorted({nick for kind in kinds for nick in NICKS[kind]})
    scores: list[SeatScore] = []
    for seat in args.seat or [None]:
        score = SeatScore(seat or "configured", lessons)
        with society(operator, seat, lessons, private_folders(cases)) as running:
            print(f"eval: seat {score.seat}: starting a society", file=sys.stderr, flush=True)
            running.start(nicks)
            for loaded in cases:
                print(f"eval: seat {score.seat}: case {loaded.name}", file=sys.stderr, flush=True)
                score.cases.append(run_case(running, loaded))
        scores.append(score)
    name = str(suite_folder(args.suite))
    if args.json:
        print(json.dumps({"suite": name, "seats": [s.to_dict() for s in scores]}, indent=1))
    else:
        print(render(name, scores))
    return EXIT_OK if all(c.passed for s in scores for c in s.cases) else EXIT_FAILED

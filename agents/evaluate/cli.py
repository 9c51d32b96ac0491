"""`bullpen eval SUITE [--seat NAME …] [--lessons on|off] [--rounds N] [--json]`."""

from __future__ import annotations

import argparse
import json
import sys

from agents.evaluate.cases import Loaded, load_suite, private_folders, suite_folder
from agents.evaluate.rounds import LEARNING_NICKS, MAX_ROUNDS, learn, memory_repos
from agents.evaluate.runners import NICKS, run_case
from agents.evaluate.scoreboard import SeatScore, render
from agents.evaluate.society import EvalSociety, society
from agents.evaluate.stepcases import StepCase
from agents.evaluate.stepmain import run_steps
from agents.home import Home
from room.errors import UsageError

EXIT_OK, EXIT_FAILED = 0, 1


def _say(text: str) -> None:
    print(f"eval: {text}", file=sys.stderr, flush=True)


def _rounds(args: argparse.Namespace) -> int:
    rounds = int(getattr(args, "rounds", 1) or 1)
    if not 1 <= rounds <= MAX_ROUNDS:
        raise UsageError(f"--rounds {rounds}: give 1 to {MAX_ROUNDS} rounds")
    if rounds > 1 and args.lessons == "off":
        raise UsageError(
            "--rounds measures what the lessons of each round do for the next; with "
            "--lessons off every round would be the same: drop one of them"
        )
    return rounds


def _one_round(
    running: EvalSociety, score: SeatScore, cases: list[Loaded], seat: str | None
) -> None:
    label = f"seat {score.seat}: round {score.round}"
    for loaded in cases:
        if not isinstance(loaded.case, StepCase):
            _say(f"{label}: case {loaded.name}")
            result = run_case(running, loaded.in_round(score.round))
            result.case = loaded.name
            score.cases.append(result)
    steps = [loaded for loaded in cases if isinstance(loaded.case, StepCase)]
    if steps:
        _say(f"{label}: {len(steps)} step cases")
    for done, result in enumerate(run_steps(running, steps, seat, score.round), start=1):
        verdict = "skipped" if result.skipped else "pass" if result.passed else "FAIL"
        _say(f"{label}: step case {done}/{len(steps)} {result.case}: {verdict}")
        score.cases.append(result)


def cmd_eval(args: argparse.Namespace) -> int:
    """Every case under every seat assignment (each round); exit 1 when any case failed."""
    operator = Home.at(args.home)
    operator.require()
    cases = load_suite(args.suite)  # every case checked before anything starts
    rounds = _rounds(args)
    lessons = args.lessons == "on"
    kinds = sorted({loaded.case.kind for loaded in cases} - {"step"})
    nicks = sorted({nick for kind in kinds for nick in NICKS[kind]})
    if rounds > 1:
        nicks = sorted({*nicks, *LEARNING_NICKS})
    scores: list[SeatScore] = []
    for seat in args.seat or [None]:
        with society(operator, seat, lessons, private_folders(cases), keep=args.keep) as running:
            if nicks:
                _say(f"seat {seat or 'configured'}: starting a society")
                running.start(nicks)
            if rounds > 1:
                memory_repos(running)
            for number in range(1, rounds + 1):
                score = SeatScore(seat or "configured", lessons, round=number)
                if args.keep:
                    score.home = str(running.root)
                _one_round(running, score, cases, seat)
                if number < rounds:
                    score.learned = learn(running, number, score.cases, score.seat)
                scores.append(score)
    name = str(suite_folder(args.suite))
    for score in scores:
        if score.home is not None and score.round == rounds:  # --keep: where to replay
            print(
                f"eval: seat {score.seat}: kept the home {score.home} (its society stopped); "
                f"open a case's thread with `bullpen --home {score.home} replay THREAD --list`",
                file=sys.stderr,
            )
    if args.json:
        print(json.dumps({"suite": name, "seats": [s.to_dict() for s in scores]}, indent=1))
    else:
        print(render(name, scores))
    failed = any(not c.passed and c.skipped is None for s in scores for c in s.cases)
    return EXIT_FAILED if failed else EXIT_OK

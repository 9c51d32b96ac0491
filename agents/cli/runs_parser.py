"""The command line's pipeline runs: start one (expedition, backpass, build), answer it,
or cancel it. Registered by agents/cli/parser.py, which names each command's function as
a string imported only when it runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from agents.cli.argtypes import Formatter, _home_option, _seconds, _wait_timeout

Add = Callable[[str, str, str], argparse.ArgumentParser]
# A run's states, as agents/web/runs.py names them (its page and `bullpen runs` agree).
RUN_STATES = ("open", "waiting", "done", "failed", "cancelled")
FINAL_JSON = "print the final result as one JSON object {thread, exit, report, data}"


def _budget(text: str) -> Any:
    """--budget's type: a RunBudget (agents/gateway/runbudgets.py); refused: exit 2."""
    from agents.gateway.runbudgets import parse_budget  # only when a run command parses it

    try:
        return parse_budget(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _budget_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--budget",
        type=_budget,
        metavar="LIMITS",
        help="this run's own budget at the gateway, e.g. tokens=20000,calls=40,cost=0.5: the "
        "run stops, saying so in the room, at the first call that would pass it (the lower "
        "of it and [budgets] holds)",
    )


def add_run_commands(add: Add) -> None:
    p = add(
        "expedition",
        "agents.expedition.cli:cmd_expedition",
        "run a corpus expedition to its Dig Report",
    )
    p.add_argument("--title", help="the article's working title")
    p.add_argument("--keyword", help="the primary keyword of the pattern")
    p.add_argument("--kb", help="the knowledge-base folder (default: [expedition] kb)")
    p.add_argument(
        "--voice",
        default="Carbon",
        choices=["Carbon", "Si-C", "Silicon"],
        help="the brief's voice; Carbon (the operator's own) needs a voice anchor",
    )
    p.add_argument("--archetype", help="the primary archetype / category to match")
    p.add_argument("--monomyth", help="the monomyth stage to match")
    p.add_argument("--blaze", help="a blaze file (role: guidance) whose claims seed the search")
    p.add_argument("--yes", action="store_true", help="confirm the Dig Report as it is")
    p.add_argument("--json", action="store_true", help=FINAL_JSON)
    _wait_timeout(p, 900.0, "each turn (the Dig Report, then the brief)", old="--timeout")
    _budget_option(p)
    turn = p.add_subparsers(
        dest="action",
        metavar="[confirm THREAD]",
        help="without it: start a run; confirm THREAD: answer a waiting run",
    )
    c = turn.add_parser(
        "confirm",
        help="answer a waiting run's Dig Report",
        description="answer a waiting run's Dig Report (or its MISSING brief)",
        formatter_class=Formatter,
    )
    _home_option(c)
    c.add_argument("thread", help="the run's thread, as printed with its Dig Report")
    c.add_argument(
        "--drop",
        nargs="+",
        action="extend",
        default=[],
        metavar="ID",
        help="rows to leave out (repeatable: --drop row_2 --drop row_5, or --drop row_2 row_5)",
    )
    c.add_argument("--redirect", help="search again with this added to the pattern")
    c.add_argument(
        "--anchor",
        metavar="FILE",
        help="a lived file of the knowledge base to anchor the voice (checked with the "
        "briefer's gates before anything is posted; also answers a MISSING brief)",
    )
    _wait_timeout(c, 900.0, "the brief", old="--timeout")
    c.add_argument("--json", action="store_true", help=FINAL_JSON)

    p = add(
        "backpass",
        "agents.backpass.cli:cmd_backpass",
        "run the memory backpass and print its funnel",
    )
    p.add_argument("--public", help="the public memory repository")
    p.add_argument("--private", help="the private memory repository")
    p.add_argument("--traces", help="the folder of session transcripts")
    p.add_argument("--state", help="the state file of `sha256  path` lines")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="analyse and report; memory, ledger and state untouched",
    )
    p.add_argument("--concurrency", type=int, help="analyses in flight at once (default 4)")
    p.add_argument("--timeout", type=_seconds, help="hard limit in seconds on one trace's analysis")
    _wait_timeout(p, 4 * 3600.0, "the final report")
    p.add_argument(
        "--bulk",
        metavar="SEAT",
        help="the [seats.SEAT] table that analyses each trace in this run "
        "(default: $BULLPEN_BULK_SEAT, else the bulk role's own seat)",
    )
    p.add_argument(
        "--synthesis",
        metavar="SEAT",
        help="the [seats.SEAT] table that makes this run's synthesis call "
        "(default: $BULLPEN_SYNTHESIS_SEAT, else the synthesis role's own seat)",
    )
    p.add_argument("--json", action="store_true", help=FINAL_JSON)
    _budget_option(p)

    p = add(
        "build",
        "agents.build.cli:cmd_build",
        "run a test-first build from a ticket (bullpen docs build)",
    )
    p.add_argument("ticket", help="the ticket file (config/build-ticket.md is an example)")
    _wait_timeout(p, 4 * 3600.0, "the final report")
    p.add_argument("--json", action="store_true", help=FINAL_JSON)
    _budget_option(p)

    p = add(
        "runs",
        "agents.cli.runs:cmd_runs",
        "list the society's runs (expedition, backpass, build, forks) and where each waits",
    )
    p.add_argument(
        "--state", action="append", choices=RUN_STATES, help="only runs in this state (repeatable)"
    )
    p.add_argument(
        "--kind",
        action="append",
        help="only runs of this pipeline: expedition, backpass, build (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON array, one object per run")
    shown = p.add_subparsers(
        dest="action", metavar="ACTION", help="show THREAD: one run in full (default: the list)"
    )
    show = shown.add_parser(
        "show", help="one run's steps and where it waits", formatter_class=Formatter
    )
    _home_option(show)
    show.add_argument("thread", help="the run's thread (exp-…, backpass-…, build-…)")
    show.add_argument("--json", action="store_true", help="print it as one JSON object")

    p = add(
        "cancel",
        "agents.cli.cancel:cmd_cancel",
        "stop a run (expedition, backpass, build): the foreman ends it as CANCELLED",
    )
    p.add_argument("thread", help="the run's thread, as its command printed it (exp-…, build-…)")
    p.add_argument("--reason", default="", help="why, for the room and the report")
    _wait_timeout(p, 30.0, "the foreman's CANCELLED report", old="--wait")
    p.add_argument("--json", action="store_true", help="print the outcome as one JSON object")

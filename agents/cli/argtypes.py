"""The command line's argument types and shared options: each refuses a bad value with a
sentence argparse prints, naming the option."""

from __future__ import annotations

import argparse
import math
import sys


class Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default shown, as `(default: X)`, unless its help already says it or
    there is none to show (no value, a flag that is off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        return super()._get_help_string(action) or text


def _home_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--home",
        default=argparse.SUPPRESS,
        help="the bullpen home (default: $BULLPEN_HOME or ~/.config/bullpen)",
    )


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--thread", help="only this run's thread")
    parser.add_argument("--to", help="only lines addressed to this nick")
    parser.add_argument("--from", dest="sender", help="only lines from this nick")
    parser.add_argument(
        "--hub", action="store_true", help="read through the hub even if the room file is here"
    )
    parser.add_argument(
        "--relaxed", action="store_true", help="read through the relaxed listener with its token"
    )


def _seconds(text: str) -> float:
    """A timeout: a finite number of seconds above 0 (argparse says which option was wrong)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0, like 30")
    return value


class _RenamedOption(argparse.Action):
    """An option's old name: still takes its value, and says once what it is called now."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(
            f"bullpen: warning: {option_string} is now --wait-timeout (the same seconds); "
            "the old name will go in a later release",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def _wait_timeout(
    parser: argparse.ArgumentParser, default: float, what: str, old: str | None = None
) -> None:
    """`--wait-timeout SECONDS`, one name on every command that waits for a run.

    The names mean one thing each (issue 35): `--wait-timeout` is how long this command
    follows its run before it stops waiting (the run goes on in the room; exit 3 or 75);
    `--timeout` is a limit on one piece of work (one trace's analysis, one pong). `old` is
    the name a command used before (`--timeout`, `--wait`): still taken, with a warning.
    """
    parser.add_argument(
        "--wait-timeout",
        dest="wait_timeout",
        type=_seconds,
        default=default,
        metavar="SECONDS",
        help=f"how long to wait for {what}; the run goes on in the room after it",
    )
    if old is not None:
        parser.add_argument(
            old, dest="wait_timeout", type=_seconds, action=_RenamedOption, help=argparse.SUPPRESS
        )


def _count(text: str) -> int:
    """A seq or a number of lines: a whole number, 0 or more."""
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number, 0 or more")
    return int(text)


def _at_least_one(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return value


def _port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535)")
    return int(text)

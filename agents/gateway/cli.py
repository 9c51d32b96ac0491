"""`bullpen gateway [serve|token|usage|summary|check]`: the argparse side of agents/gateway/command.py."""

from __future__ import annotations

import argparse
import re

from agents.gateway import command
from agents.home import Home
from room.errors import UsageError

_SINCE = re.compile(r"\d{4}-\d{2}-\d{2}(T[0-9:.]+Z?)?")


def check_since(value: str | None) -> str | None:
    """--since: a UTC date or time as the ledger writes it (2026-12-01 or 2026-12-01T20:00)."""
    if value is not None and not _SINCE.fullmatch(value):
        raise UsageError(
            f"--since {value!r} is not a date; give one like 2026-12-01 or 2026-12-01T20:00 (UTC)"
        )
    return value


def cmd_gateway(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    action = args.action or "serve"
    if action == "serve":
        return command.serve(home)
    if action == "token":
        return command.token(home, args.nick)
    if action == "usage":
        return command.usage(home, check_since(args.since), args.by, args.json)
    if action == "summary":
        return command.summary(home, args.day, args.dry_run)
    return command.check(home, args.backend)

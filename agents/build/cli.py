"""`bullpen build`: the argparse side of agents.build.command."""

from __future__ import annotations

import argparse
import asyncio
import math

from agents.build.command import build, read_ticket
from agents.home import Home
from room.errors import UsageError


def cmd_build(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    if not (math.isfinite(args.wait_timeout) and args.wait_timeout > 0):
        raise UsageError("--wait-timeout must be a positive number of seconds")
    ticket = read_ticket(args.ticket)
    return asyncio.run(
        build(
            home,
            ticket,
            wait_timeout=args.wait_timeout,
            as_json=getattr(args, "json", False),
            budget=getattr(args, "budget", None),
        )
    )

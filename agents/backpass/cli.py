"""`bullpen backpass`: the argparse side of agents.backpass.command."""

from __future__ import annotations

import argparse
import asyncio

from agents.backpass.command import backpass
from agents.home import Home


def cmd_backpass(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    return asyncio.run(
        backpass(
            home,
            public=args.public,
            private=args.private,
            traces=args.traces,
            state=args.state,
            report_only=args.report_only,
            concurrency=args.concurrency,
            timeout=args.timeout,
            wait_timeout=args.wait_timeout,
            bulk=args.bulk,
            synthesis=args.synthesis,
            as_json=getattr(args, "json", False),
            budget=getattr(args, "budget", None),
        )
    )

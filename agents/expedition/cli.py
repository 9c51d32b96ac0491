"""`bullpen expedition` and `bullpen expedition confirm`: the argparse side of .command."""

from __future__ import annotations

import argparse
import asyncio

from agents.expedition.command import confirm, expedition
from agents.home import Home
from room.errors import ConfigError


def cmd_expedition(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    if args.action == "confirm":
        return asyncio.run(
            confirm(home, args.thread, drop=args.drop, redirect=args.redirect, timeout=args.timeout)
        )
    if not args.title or not args.keyword:
        raise ConfigError(
            "an expedition needs --title and --keyword, e.g. "
            "bullpen expedition --title 'Waiting Is Part of the Work' --keyword patience"
        )
    return asyncio.run(
        expedition(
            home,
            title=args.title,
            keyword=args.keyword,
            kb=args.kb,
            voice=args.voice,
            archetype=args.archetype,
            monomyth=args.monomyth,
            blaze=args.blaze,
            yes=args.yes,
            timeout=args.timeout,
        )
    )

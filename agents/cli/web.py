"""`bullpen web` (serve the browser view) and `bullpen web url` (a one-time login link)."""

from __future__ import annotations

import argparse
import socket
import sys

from agents.config import parse_address
from agents.home import Home


def _listening(address: str) -> bool:
    """Whether something accepts connections at HOST:PORT (a one-second look)."""
    host, port = parse_address(address, "[web] listen")
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def cmd_web(args: argparse.Namespace) -> int:
    from agents.web.server import login_url, serve, web_config

    home = Home.at(args.home)
    home.require()
    if getattr(args, "action", None) == "url":
        # `bullpen web` serves at [web]'s defaults when the section is missing: so does the
        # link, or nobody could log in to what it serves
        web = web_config(home)
        print(login_url(home))
        if home.society.web is None:
            print(
                f"bullpen: note: {home.society_file} has no [web] section: this link is for "
                f"`bullpen web`, which serves at the default {web.listen}; `bullpen up` starts "
                "the web view only with a [web] section",
                file=sys.stderr,
            )
        if not _listening(web.listen):
            print(
                f"bullpen: note: nothing listens at {web.base_url()} yet: the link works once "
                "the web view runs (`bullpen up`, `bullpen web`, or its user unit)",
                file=sys.stderr,
            )
        return 0
    return serve(home)

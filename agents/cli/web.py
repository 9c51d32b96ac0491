"""`bullpen web` (serve the browser view) and `bullpen web url` (a one-time login link)."""

from __future__ import annotations

import argparse
import socket
import sys

from agents.config import parse_address
from agents.home import Home
from room.errors import ConfigError


def _listening(address: str) -> bool:
    """Whether something accepts connections at HOST:PORT (a one-second look)."""
    host, port = parse_address(address, "[web] listen")
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def cmd_web(args: argparse.Namespace) -> int:
    from agents.web.server import login_url, serve

    home = Home.at(args.home)
    home.require()
    if getattr(args, "action", None) == "url":
        web = home.society.web
        if web is None:
            raise ConfigError(
                f"this home has no web view: {home.society_file} has no [web] section, so a "
                "link would point where nothing listens. Add `[web]` (listen = "
                '"127.0.0.1:8070" by default) and start it with `bullpen up` or `bullpen web`'
            )
        print(login_url(home))
        if not _listening(web.listen):
            print(
                f"bullpen: note: nothing listens at {web.base_url()} yet: the link works once "
                "the web view runs (`bullpen up`, `bullpen web`, or its user unit)",
                file=sys.stderr,
            )
        return 0
    return serve(home)

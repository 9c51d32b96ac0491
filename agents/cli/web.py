"""`bullpen web` (serve the browser view) and `bullpen web url` (a one-time login link)."""

from __future__ import annotations

import argparse

from agents.home import Home


def cmd_web(args: argparse.Namespace) -> int:
    from agents.web.server import login_url, serve

    home = Home.at(args.home)
    home.require()
    if getattr(args, "action", None) == "url":
        print(login_url(home))
        return 0
    return serve(home)

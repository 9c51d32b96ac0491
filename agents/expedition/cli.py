"""`bullpen expedition` and `bullpen expedition confirm`: the argparse side of .command.

Every argument is checked here, before anything reaches the room: a run
that cannot start is refused with exit 2 (argparse's convention), never
posted and left to fail. The knowledge base and the blaze get the same
checks step 0 makes, read from this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import math
from collections.abc import Sequence
from pathlib import Path

from agents.expedition.blaze import BlazeError, read_blaze
from agents.expedition.command import confirm, expedition
from agents.expedition.config import ExpeditionConfig
from agents.expedition.kb import check_kb
from agents.home import Home
from room.errors import StepFailed, UsageError


def check_timeout(value: float) -> float:
    """A wait in seconds: finite and above 0, or the run would be posted and abandoned."""
    if not math.isfinite(value) or value <= 0:
        raise UsageError(
            f"--wait-timeout {value:g} is not a number of seconds above 0; pass one like "
            "--wait-timeout 900 (the default), and the run goes on in the room after it"
        )
    return value


def check_answer(drop: Sequence[str], redirect: str | None, anchor: str | None = None) -> None:
    """An answer the foreman can act on as meant: a blank redirect is not a confirm."""
    if redirect is not None and not redirect.strip():
        raise UsageError(
            "--redirect is empty; say what to look for instead, e.g. --redirect 'kilns and "
            "ovens', or leave --redirect out to confirm"
        )
    if any(not row.strip() for row in drop):
        raise UsageError("--drop was given an empty id; name rows like --drop row_5")
    if anchor is not None and not anchor.strip():
        raise UsageError("--anchor is empty; name a lived file of the knowledge base")
    if anchor is not None and redirect is not None:
        raise UsageError(
            "--anchor and --redirect do not go together: a redirect digs again; point to the "
            "anchor when you confirm its Dig Report"
        )
    if drop and redirect is not None:
        raise UsageError(
            "--drop and --redirect do not go together: a redirect digs again and shows a new "
            "Dig Report, where you can drop rows; give one of them"
        )


def _typed(value: str | None) -> str | None:
    """A path typed at the operator's shell means the shell's folder, not the home."""
    return str(Path(value).expanduser().absolute()) if value else None


def check_paths(home: Home, kb: str | None, blaze: str | None) -> None:
    """--kb (or the configured knowledge base) and --blaze, checked as step 0 will check them.

    Each must lie under its [roots] folder (a path may only narrow the run); the
    knowledge base must be a folder whose corpus_index.md parses, the blaze one
    readable UTF-8 Markdown file of guidance. The home's [expedition] section is
    checked either way (a ConfigError, exit 78), since step 0 reads it too.
    """
    config = ExpeditionConfig.from_home(home)
    try:
        paths = config.paths(home, kb=_typed(kb), blaze=_typed(blaze))
        check_kb(paths.kb)
        if paths.blaze is not None:
            read_blaze(paths.blaze, paths.roots)
    except (StepFailed, BlazeError) as exc:
        raise UsageError(exc.message) from None


def cmd_expedition(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    timeout = check_timeout(args.wait_timeout)
    if args.action == "confirm":
        if not args.thread.strip():
            raise UsageError(
                "confirm needs the run's thread, like exp-3f9a1c2e; find it with `bullpen runs`"
            )
        check_answer(args.drop, args.redirect, args.anchor)
        return asyncio.run(
            confirm(
                home,
                args.thread,
                drop=args.drop,
                redirect=args.redirect,
                anchor=args.anchor,
                timeout=timeout,
                as_json=getattr(args, "json", False),
            )
        )
    if not (args.title or "").strip() or not (args.keyword or "").strip():
        raise UsageError(
            "an expedition needs --title and --keyword, e.g. "
            "bullpen expedition --title 'Waiting Is Part of the Work' --keyword patience"
        )
    check_paths(home, args.kb, args.blaze)
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
            timeout=timeout,
            as_json=getattr(args, "json", False),
            budget=getattr(args, "budget", None),
        )
    )

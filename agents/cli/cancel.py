"""`bullpen cancel THREAD [--reason …]`: stop a run, in the room, as its operator.

The cancel is a verified post to the foreman (agents/runtime/cancel.py); the foreman ends
the run with a CANCELLED report and tells each step still working on it. This command
waits a little for that report, so the operator sees the run stop rather than hope it did.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from agents.home import Home
from agents.runtime.cancel import is_cancelled_report, post_cancel

CONFIRM_S = 30.0
EXIT_OK, EXIT_UNCONFIRMED = 0, 1


async def _cancel(home: Home, thread: str, reason: str, wait: float, as_json: bool = False) -> int:
    async with home.client(home.society.operator) as client:
        stored = await post_cancel(client, thread, reason)
        print(f"cancel of {thread} posted (seq {stored.get('seq')})", file=sys.stderr, flush=True)
        deadline = time.monotonic() + wait
        after = int(stored.get("seq", 0))
        while time.monotonic() < deadline:
            left = max(0.1, deadline - time.monotonic())
            lines, after = await client.read(after, 100, thread=thread, wait=min(left, 5.0))
            for line in lines:
                if line.get("verified") and is_cancelled_report(line.get("data") or {}):
                    said = str(line.get("body", ""))
                    print(_json(thread, stored, said) if as_json else said)
                    return EXIT_OK
    if as_json:
        print(_json(thread, stored, None))
    print(
        f"the foreman has not confirmed the cancel within {wait:g} s: is it running (`bullpen "
        "trust check`)? The cancel is in the room; the foreman acts on it when it starts",
        file=sys.stderr,
    )
    return EXIT_UNCONFIRMED


def cmd_cancel(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    reason = " ".join(str(args.reason or "").split()) or "cancelled by the operator"
    return asyncio.run(_cancel(home, args.thread, reason, args.wait_timeout, args.json))


def _json(thread: str, stored: dict[str, Any], report: str | None) -> str:
    """`bullpen cancel --json`: {thread, seq (of the cancel), confirmed, report (or null)}."""
    return json.dumps(
        {
            "thread": thread,
            "seq": stored.get("seq"),
            "confirmed": report is not None,
            "report": report,
        },
        ensure_ascii=False,
    )

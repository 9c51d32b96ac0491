"""Stopping a program a handler started, and everything it started in turn."""

from __future__ import annotations

import asyncio
import os
import signal


async def kill_group(proc: asyncio.subprocess.Process) -> None:
    """Stop the program we started and everything it started, and reap it."""
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            await asyncio.wait_for(proc.wait(), grace)
            break
        except TimeoutError:
            continue

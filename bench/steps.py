"""Bench handlers, loaded by real lurker processes."""

from __future__ import annotations

import os
import time

from agents.runtime.step import Reply, StepContext
from room.message import Message


def mark(message: Message, ctx: StepContext) -> Reply:
    """Record when the handler started, so the benchmark can measure the wake latency."""
    started = time.time()
    with open(os.environ["BULLPEN_BENCH_MARKS"], "a") as marks:
        marks.write(f"{message.id} {started:.6f}\n")
    return Reply("marked")


async def amark(message: Message, ctx: StepContext) -> Reply:
    """`mark` as a coroutine step: it runs in the lurker's own event loop, so the time it
    records is the lurker's wake alone (a blocking step also pays for its forked child)."""
    return mark(message, ctx)

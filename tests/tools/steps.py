"""Step handlers for tests: each a real function a real lurker process loads."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from agents.runtime.step import Reply, StepContext, StepFailed
from room.message import Message


def boom(message: Message, ctx: StepContext) -> Reply:
    raise RuntimeError("the step exploded")


def refuse(message: Message, ctx: StepContext) -> Reply:
    raise StepFailed("the knowledge base is empty; add files to it")


def hang(message: Message, ctx: StepContext) -> Reply:
    time.sleep(3600)
    return Reply("never")


def spin(message: Message, ctx: StepContext) -> Reply:
    """Burn CPU forever, after writing down the pid doing it (a test checks it is stopped)."""
    Path(os.environ["BULLPEN_TEST_SPIN_PID"]).write_text(str(os.getpid()))
    while True:
        pass


async def slow(message: Message, ctx: StepContext) -> Reply:
    await asyncio.sleep(float((message.data or {}).get("sleep", 1)))
    return Reply("slow done")


def counted(message: Message, ctx: StepContext) -> Reply:
    """Record each handling in a file, so a test can count them."""
    path = os.environ["BULLPEN_TEST_COUNT_FILE"]
    seen = os.path.exists(path) and message.id in Path(path).read_text().split()
    with open(path, "a") as f:
        f.write(f"{message.id}\n")
    delay = float((message.data or {}).get("sleep", 0))
    if delay and not seen:  # a retried handling (after a crash) is quick
        time.sleep(delay)
    return Reply(f"handled {message.body}")

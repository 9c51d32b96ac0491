"""Example members of the society, small enough to read at a glance."""

from __future__ import annotations

from agents.runtime.step import Reply, StepContext
from room.message import Message


def echo(message: Message, ctx: StepContext) -> Reply:
    """Answer with the words it was given: shows a lurker at work in a fresh home."""
    return Reply(f"echo: {message.body}", {"echo": message.body, "by": ctx.nick})

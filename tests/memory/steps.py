"""Steps the memory tests run in real lurkers: they report what the lurker handed them."""

from __future__ import annotations

import json
import os

from agents.runtime.step import Reply, StepContext
from room.message import Message


async def told(message: Message, ctx: StepContext) -> Reply:
    """Reply with the lessons this wake was handed (ctx.lessons)."""
    return Reply(f"told {len(ctx.lessons)}", {"got": [lesson.to_dict() for lesson in ctx.lessons]})


def told_forked(message: Message, ctx: StepContext) -> Reply:
    """The same, as a blocking step (it runs in a forked child)."""
    return Reply(f"told {len(ctx.lessons)}", {"got": [lesson.to_dict() for lesson in ctx.lessons]})


def main() -> None:  # a command handler: keep what arrived on stdin, answer briefly
    raw = os.read(0, 1 << 20)
    with open(os.environ["RECORD"], "wb") as out:
        out.write(raw)
    print(json.dumps({"body": "recorded"}))


if __name__ == "__main__":
    main()

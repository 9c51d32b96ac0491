"""A lone lurker's start checks, run in the child its idle loop forks (agents/runtime/lean.py).

The child builds the full lurker, so every check it makes at start (society.toml,
the handler's module, TRUST, the nick's lock, a damaged cursor) stops `bullpen lurk`
with the same message and exit code as before, then answers with what the stdlib
idle loop needs to follow the room and judge a line by the wake rules.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents.home import Home
from agents.runtime.handlers import PythonStep
from agents.runtime.lurker import Lurker
from room import logs


def check(home_arg: str | None, nick: str, level: str) -> dict[str, Any]:
    """The idle loop's plan for `nick`, {"lean": False} when only the full lurker will do."""
    logs.configure(level=level)
    home = Home.at(home_arg)
    home.require()
    lurker = Lurker(home, nick)
    handler = lurker.handler
    works_before_a_wake = handler.tick() is not None or (
        isinstance(handler, PythonStep) and handler.loaded
    )
    if works_before_a_wake or not lurker.reads_file() or not home.room_path.exists():
        return {"lean": False}  # no room file yet: the full lurker waits for the hub to make it
    start = asyncio.run(lurker.start_position())  # a file's durable end: no hub involved
    return {
        "lean": True,
        "nick": nick,
        "room": str(home.room_path),
        "lock": str(home.home_state_dir(nick)),
        "cursor": str(lurker.cursor.path),
        "seq": start.seq,
        "offset": start.offset,
        "wake": sorted(lurker.wake),
        "trusted": sorted(lurker.trusted),
        "safety_s": home.society.lurker.safety_reread_s,
    }

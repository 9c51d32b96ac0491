"""A step whose module is seen loading: it imports `colorsys`, which nothing else a lurker
runs imports, so the interpreter's import log (PYTHONPROFILEIMPORTTIME) shows when a lurker
loads this module (tests/test_footprint.py)."""

from __future__ import annotations

import colorsys

from agents.runtime.step import Reply, StepContext
from room.message import Message

MARKER = "colorsys"


def hue(message: Message, ctx: StepContext) -> Reply:
    """Answer with the hue of a grey: always 0.0 (what matters is that the module loaded)."""
    return Reply(f"hue: {colorsys.rgb_to_hsv(0.5, 0.5, 0.5)[0]}")

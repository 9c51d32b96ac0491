"""A step whose module is seen loading: it imports `wave`, which nothing else a lurker runs
imports (not `colorsys`: rich imports that, and structlog's console renderer imports rich
where it is installed), so the interpreter's import log (PYTHONPROFILEIMPORTTIME) shows
when a lurker loads this module (tests/test_footprint.py)."""

from __future__ import annotations

import wave

from agents.runtime.step import Reply, StepContext
from room.message import Message

MARKER = "wave"


def hue(message: Message, ctx: StepContext) -> Reply:
    """Answer with a fact of the wave module (what matters is that the module loaded)."""
    return Reply(f"wave: {wave.WAVE_FORMAT_PCM}")

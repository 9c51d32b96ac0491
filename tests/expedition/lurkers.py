"""The expedition's lurkers on a demo home, as the command-line tests start them (`bullpen lurk
NICK` each, no `up`): one helper for every test that drives `bullpen expedition` for real."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tests.support import Society, wait_for

NICKS = ("foreman", "context", "termgen", "retriever", "scorer", "scotoma", "excerpter", "briefer")


def expedition_society(root: Path) -> Iterator[Society]:
    """A demo home at `root` with its hub and the expedition's lurkers; stopped after."""
    society = Society(root, demo=True)
    try:
        society.start_hub()
        lurkers = [society.spawn(f"lurk-{nick}", "lurk", nick) for nick in NICKS]
        wait_for(
            lambda: all("lurking" in p.output() or not p.alive() for p in lurkers),
            90,
            "the expedition's lurkers to start",
        )
        assert all(p.alive() for p in lurkers), [p.output() for p in lurkers]
        yield society
    finally:
        society.stop_all()

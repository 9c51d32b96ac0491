"""One lurker per nick per home: the nick's lock, held for the lurker's life.

Two lurkers for one nick (say, `bullpen up` and its systemd unit) would answer
every message twice. Both a lone lurker's stdlib idle loop (agents/runtime/lean.py)
and the full lurker take it here, so the refusal reads the same either way.
"""

from __future__ import annotations

from pathlib import Path

from room import pidlock
from room.errors import ConfigError

LOCK_NAME = "lurker.lock"


def take(folder: Path, nick: str) -> int:
    """Lock `folder`/lurker.lock (the nick's home state folder) for this process's life."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return pidlock.take(folder / LOCK_NAME)
    except pidlock.Held as held:
        raise ConfigError(
            f"another lurker for {nick} is already running (pid {held.holder}); two would "
            f"answer every message twice. Stop it first, or run {nick} in one place only: "
            "`bullpen up` or its systemd unit, not both"
        ) from None

"""Every place of this bullpen a code seat must not write, wherever the home's settings put it.

Under `[build] seat_fence = "guarded"` a cmd code seat runs with the filesystem as
its user has it, less the home's secrets. Hiding the secrets alone left the rest
of the bullpen writable: a seat appended to society.toml, to a memory
repository's `.git/config` (a filter the backpass would then run) and to
room/room.jsonl. So the guarded fence binds each of these places read-only: the
home itself, the room's folder, the memory repositories and the backpass's other
folders (which may lie outside the home), and the lurkers' unit state folders.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from agents.backpass.config import PATH_KEYS, BackpassConfig
from room.errors import BullpenError

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["bullpen_places"]


def bullpen_places(home: Home) -> list[Path]:
    """The existing places (resolved, none inside another) a seat may read but not write."""
    found = [*home.homes()]
    with contextlib.suppress(BullpenError, OSError, ValueError):
        found.append(home.room_path.parent)
    with contextlib.suppress(BullpenError, OSError, ValueError):
        backpass = BackpassConfig.from_home(home)
        found += [home.path(str(getattr(backpass, key))) for key in PATH_KEYS]
    with contextlib.suppress(BullpenError, OSError, ValueError):
        found += [place.parent for place in home.unit_state_dirs("-")]
    places = [Path(os.path.realpath(place)) for place in found if os.path.lexists(place)]
    kept: list[Path] = []
    for place in sorted(dict.fromkeys(places), key=lambda p: len(p.parts)):
        if not any(place == outer or outer in place.parents for outer in kept):
            kept.append(place)
    return kept

"""Every place of this bullpen a code seat must not write, wherever the home's settings put it.

Under `[build] seat_fence = "guarded"` a cmd code seat runs with the filesystem as
its user has it, less the home's secrets. Hiding the secrets alone left the rest
of the bullpen writable: a seat appended to society.toml, to a memory
repository's `.git/config` (a filter the backpass would then run) and to
room/room.jsonl. So the guarded fence binds each of these places read-only: the
home itself, the room's folder, the memory repositories and the backpass's other
folders (which may lie outside the home), and the lurkers' unit state folders.

The interpreter bullpen runs on is such a place too: a seat that wrote a `.pth`
file into the site-packages of bullpen's virtualenv had the next `bullpen`
command run it, unfenced, with the secret at hand. So its prefixes, its
standard library and site-packages (and what a link there points at, like
Debian's sitecustomize.py in /etc), the user's site-packages, every folder on
its import path and bullpen's own source are read-only to a guarded seat too.
The secrets and private data inside any of these are hidden, not only
read-only (agents/privateplaces.py).
"""

from __future__ import annotations

import contextlib
import os
import site
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from agents.backpass.config import PATH_KEYS, BackpassConfig
from room.errors import BullpenError

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["bullpen_places", "interpreter_places"]


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
    return _outermost(found)


def _outermost(found: list[Path]) -> list[Path]:
    """The existing places of `found`, resolved, none inside another."""
    places = [Path(os.path.realpath(place)) for place in found if os.path.lexists(place)]
    kept: list[Path] = []
    for place in sorted(dict.fromkeys(places), key=lambda p: len(p.parts)):
        if not any(place == outer or outer in place.parents for outer in kept):
            kept.append(place)
    return kept


def _links_out(folder: Path) -> list[Path]:
    """What the links at the top of `folder` point at (a sitecustomize.py kept in /etc)."""
    found = []
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_symlink():
                found.append(Path(os.path.realpath(entry.path)))
    return found


def interpreter_places() -> list[Path]:
    """The interpreter this bullpen runs on and everything it imports from, resolved, none
    inside another: read-only to a guarded seat. A folder that holds the user's home or the
    temporary folder (a `python -m` run from there puts it on the import path) is left out:
    making it read-only would make the guarded fence the strict one."""
    import agents

    found = [Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)]
    found.append(Path(os.path.realpath(sys.executable)).parent)
    found += [Path(p) for p in sysconfig.get_paths().values()]
    found += [Path(p) for p in (*site.getsitepackages(), site.getusersitepackages())]
    found.append(Path(agents.__file__).resolve().parent.parent)  # bullpen's own source
    found += [Path(p) for p in sys.path if p and os.path.isdir(p)]
    found += [link for folder in list(found) for link in _links_out(folder)]
    shared = [Path(os.path.realpath(p)) for p in (Path.home(), tempfile.gettempdir(), "/tmp")]
    return [
        place
        for place in _outermost(found)
        if not any(place == open_ or place in open_.parents for open_ in shared)
    ]

"""One backpass at a time per home.

Two backpasses at once would both find every trace pending, analyse each twice and leave
two branches on one commit. So `bullpen backpass` takes the home's backpass lock
(`state/backpass.lock`, a flock the kernel drops when its holder dies, however it dies)
before it posts, keeps it while it follows its run, and writes its run's thread into the
lock file so a second command can say which run holds it. A run whose command detached
(Ctrl-C, then "detach") still runs in the room without the lock: before posting, the
room is asked for an open backpass run too, and the second command is told its thread.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from room import pidlock
from room.errors import BullpenError

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["EXIT_BUSY", "BackpassBusy", "one_backpass", "open_backpass"]

LOCK_NAME = "backpass.lock"
EXIT_BUSY = 75  # EX_TEMPFAIL: try again once the other run is over


class BackpassBusy(BullpenError):
    """Another backpass of this home is running."""

    code = "backpass_busy"


def _advice(thread: str) -> str:
    return (
        f"follow it with `bullpen runs show {thread}`, wait for it to end, or stop it with "
        f"`bullpen cancel {thread}`; then run this again. Nothing was posted"
    )


def lock_path(home: Home) -> Path:
    return home.root / "state" / LOCK_NAME


@contextlib.contextmanager
def one_backpass(home: Home) -> Iterator[Callable[[str], None]]:
    """Hold the home's backpass lock for the block; BackpassBusy naming the run that holds
    it. The block calls the yielded function with its run's thread once it has one."""
    path = lock_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = pidlock.take(path)
    except pidlock.Held as held:
        words = path.read_text(errors="replace").split()
        pid = words[0] if words else held.holder
        if len(words) > 1:
            raise BackpassBusy(
                f"another backpass is running in this home: run {words[1]} (pid {pid}) holds "
                f"{path}; {_advice(words[1])}"
            ) from None
        raise BackpassBusy(
            f"another bullpen backpass (pid {pid}) holds {path} and is about to post its run; "
            "wait for it (`bullpen runs --kind backpass`), then run this again. Nothing was posted"
        ) from None

    def holds(thread: str) -> None:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {thread}\n".encode(), 0)

    try:
        yield holds
    finally:
        os.close(fd)


async def open_backpass(home: Home) -> None:
    """BackpassBusy when the room has a backpass run still going (one whose command let go
    of the lock: detached, or run on another host)."""
    from agents.cli.runs import all_runs, room_lines

    if not home.trust_file.exists():
        return  # no trust table: this home can post no run at all (the lock still guards)
    for run in all_runs(home, await room_lines(home)):
        if run.pipeline == "backpass" and run.state in ("open", "waiting"):
            raise BackpassBusy(
                f"a backpass run is still going in the room: {run.thread} ({run.where}, "
                f"started {run.start.get('ts')}); {_advice(run.thread)}"
            )

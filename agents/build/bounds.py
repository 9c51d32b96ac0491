"""Bounds on a fenced test run that resource limits cannot keep: processes as root, total bytes.

RLIMIT_NPROC is ignored for root (uid 0 in the first user namespace), so a root
grinder's `processes` was a wish: 300 of 300 forks succeeded under 128. A pids
cgroup is not a wish: each run gets its own (the cgroup v1 `pids` hierarchy, or
cgroup v2 where the pids controller is delegated), `pids.max` = processes, the
child joins it before it execs, and a fork or thread past the bound fails with
EAGAIN for every process in it, root or not. When the run ends every process
left in the cgroup is killed, by the ids the kernel lists there (a process that
left the run's process group included), and the cgroup is removed. Where no
pids cgroup can be made (no cgroup mount, not allowed), the rlimit binds a
non-root user; `pids_cgroups()` says which holds here.

RLIMIT_FSIZE bounds each file, not their sum. The total a run may add to its
writable places (the clone and its cache) is watched: every WATCH_S the places
are measured (allocated blocks, so a sparse file counts what it holds), a run
past the bound is killed, and the places are measured once more when it ends.
A burst between two looks can overshoot by what the disk takes in WATCH_S.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import time
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

__all__ = [
    "WATCH_S",
    "PidsCgroup",
    "disk_used",
    "open_pids",
    "pids_cgroups",
    "pids_parent",
    "watch_disk",
]

WATCH_S = 0.25
MB = 1024 * 1024


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(fs type, mount root, mount point, super options) of every mount this process sees."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3:
                continue
            point = fields[4].replace("\\040", " ")
            found.append((tail[0], fields[3], point, set(tail[2].split(","))))
    return found


def _candidates() -> list[Path]:
    """The folders of this process's own pids cgroup (v1, then v2) a child may be made in."""
    own: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else ["unified"]:
                own[name] = path
    found = []
    for fstype, root, point, options in _mounts():
        if fstype == "cgroup" and "pids" in options and "pids" in own:
            relative = os.path.relpath(own["pids"], root)
        elif fstype == "cgroup2" and "unified" in own:
            offered = Path(point, "cgroup.controllers")
            with contextlib.suppress(OSError):
                if "pids" not in offered.read_text().split():
                    continue
            relative = os.path.relpath(own["unified"], root)
        else:
            continue
        if not relative.startswith(".."):
            found.append(Path(point) / relative)
    return found


class PidsCgroup:
    """One run's own pids cgroup: made with its bound, joined by the child, emptied, removed."""

    def __init__(self, parent: Path, limit: int) -> None:
        self.path = parent / f"bullpen-run-{os.getpid()}-{secrets.token_hex(4)}"
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(limit))
        except OSError:
            self.path.rmdir()
            raise

    def join(self) -> None:
        """Move the calling process in; run in the child between fork and exec."""
        with open(self.path / "cgroup.procs", "w") as procs:
            procs.write(str(os.getpid()))

    def refused(self) -> int:
        """How many forks the bound refused (`max` in pids.events)."""
        with contextlib.suppress(OSError, ValueError):
            for line in (self.path / "pids.events").read_text().splitlines():
                name, _, count = line.partition(" ")
                if name == "max":
                    return int(count)
        return 0

    def _members(self) -> list[int]:
        with contextlib.suppress(OSError):
            return [int(pid) for pid in (self.path / "cgroup.procs").read_text().split()]
        return []

    def close(self) -> None:
        """Kill every process still in the cgroup (by the ids it lists), then remove it."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            members = self._members()
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                self.path.rmdir()
                return
            time.sleep(0.02)


@cache
def pids_parent() -> Path | None:
    """Where this process may make pids cgroups, found by a trial one; None: nowhere."""
    for candidate in _candidates():
        try:
            trial = PidsCgroup(candidate, 16)
        except OSError:
            continue
        trial.close()
        _sweep(candidate)
        return candidate
    return None


def _sweep(parent: Path) -> None:
    """Remove the empty cgroups a grinder that died mid-run left (its pid is in the name)."""
    for stale in parent.glob("bullpen-run-*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            owner = int(stale.name.split("-")[2])
            if owner != os.getpid() and not Path(f"/proc/{owner}").exists():
                stale.rmdir()  # refused (EBUSY) while any process is still in it


def pids_cgroups() -> bool:
    """Can a run here get its own pids cgroup (the bound that holds for root)?"""
    return pids_parent() is not None


def open_pids(limit: int) -> PidsCgroup | None:
    """A new pids cgroup bound at `limit`, or None where none can be made."""
    parent = pids_parent()
    if parent is None:
        return None
    try:
        return PidsCgroup(parent, limit)
    except OSError:
        return None


def disk_used(places: Sequence[Path]) -> int:
    """Bytes allocated under `places` (links not followed)."""
    total = 0
    for place in places:
        for where, _, files in os.walk(place):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(where, name)).st_blocks * 512
    return total


async def watch_disk(
    places: Sequence[Path], start: int, limit_mb: int, kill: Callable[[], None]
) -> int:
    """Measure `places` every WATCH_S; past `start` + limit_mb, call `kill` and return the
    bytes added. Runs until cancelled (the run ended first)."""
    while True:
        await asyncio.sleep(WATCH_S)
        added = await asyncio.to_thread(disk_used, places) - start
        if added > limit_mb * MB:
            kill()
            return added

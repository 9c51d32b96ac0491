"""Bounds on a fenced test run that resource limits cannot keep: processes as root, total bytes.

The processes a run may have and the memory it may hold are bound by its own
cgroups (agents/build/cgroups.py); `pids_cgroups()` says whether the process
bound holds for root here.

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
from collections.abc import Callable, Sequence
from pathlib import Path

from agents.build.cgroups import MB, cgroup_parent

__all__ = ["MB", "WATCH_S", "disk_used", "pids_cgroups", "pids_parent", "watch_disk"]

WATCH_S = 0.25


def pids_parent() -> Path | None:
    """Where this process may make pids cgroups; None: nowhere."""
    return cgroup_parent("pids")


def pids_cgroups() -> bool:
    """Can a run here get its own pids cgroup (the bound that holds for root)?"""
    return pids_parent() is not None


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

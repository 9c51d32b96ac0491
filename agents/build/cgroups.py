"""A fenced test run's own cgroups: the bounds the kernel keeps where rlimits cannot.

RLIMIT_NPROC is ignored for root (uid 0 in the first user namespace), so a root
grinder's `processes` was a wish: 300 of 300 forks succeeded under 128. A pids
cgroup is not a wish: `pids.max` = processes, and a fork or thread past it fails
with EAGAIN for every process in it, root or not.

RLIMIT_AS bounds reservations, not memory, and a browser reserves tens of GB it
never uses, so the canvas game's runner has its address-space limit lifted; it
then held 5 GB with nothing to stop it. A memory cgroup bounds what the run
really holds (`memory.limit_in_bytes` in v1, `memory.max` in v2, swap included
where the kernel counts it): past it the kernel's OOM killer ends a process of
the run, and the run's result says so.

Each run gets its own cgroup per hierarchy (the cgroup v1 `pids` and `memory`
hierarchies, or one cgroup v2 where the controllers are delegated), the child
joins it before it execs, and when the run ends every process left in it is
killed, by the ids the kernel lists there (a process that left the run's
process group included), and the cgroup is removed. Where none can be made (no
cgroup mount, not allowed), `cgroup_parent()` is None and the caller says so.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from functools import cache
from pathlib import Path

__all__ = ["RunCgroups", "cgroup_parent", "open_cgroups"]

MB = 1024 * 1024
TRIAL = {"pids": 16, "memory": 64 * MB}


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


def _candidates(controller: str) -> list[Path]:
    """The folders of this process's own cgroup with `controller` (v1, then v2) a child may
    be made in."""
    own: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else ["unified"]:
                own[name] = path
    found = []
    for fstype, root, point, options in _mounts():
        if fstype == "cgroup" and controller in options and controller in own:
            relative = os.path.relpath(own[controller], root)
        elif fstype == "cgroup2" and "unified" in own:
            offered = Path(point, "cgroup.controllers")
            with contextlib.suppress(OSError):
                if controller not in offered.read_text().split():
                    continue
            relative = os.path.relpath(own["unified"], root)
        else:
            continue
        if not relative.startswith(".."):
            found.append(Path(point) / relative)
    return found


def _settings(parent: Path, controller: str, value: int) -> dict[str, str]:
    """The files that bound `controller` at `value`, in the order they must be written."""
    v2 = (parent / "cgroup.controllers").exists()
    if controller == "pids":
        return {"pids.max": str(value)}
    if v2:
        return {"memory.max": str(value), "memory.swap.max": "0"}
    return {"memory.limit_in_bytes": str(value), "memory.memsw.limit_in_bytes": str(value)}


OPTIONAL = {"memory.swap.max", "memory.memsw.limit_in_bytes"}  # absent without swap accounting


class _Cgroup:
    """One cgroup of one run: made with its bounds, joined by the child, emptied, removed."""

    def __init__(self, parent: Path, settings: dict[str, str]) -> None:
        self.path = parent / f"bullpen-run-{os.getpid()}-{secrets.token_hex(4)}"
        self.path.mkdir()
        try:
            for name, value in settings.items():
                try:
                    (self.path / name).write_text(value)
                except OSError:
                    if name not in OPTIONAL:
                        raise
        except OSError:
            self.path.rmdir()
            raise

    def join(self) -> None:
        with open(self.path / "cgroup.procs", "w") as procs:
            procs.write(str(os.getpid()))

    def count(self, file: str, key: str) -> int:
        """The counter `key` of a flat keyed file (pids.events, memory.events, oom_control)."""
        with contextlib.suppress(OSError, ValueError):
            for line in (self.path / file).read_text().splitlines():
                name, _, number = line.partition(" ")
                if name == key:
                    return int(number)
        return 0

    def close(self) -> None:
        """Kill every process still in the cgroup (by the ids it lists), then remove it."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                for pid in (int(p) for p in (self.path / "cgroup.procs").read_text().split()):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                self.path.rmdir()
                return
            time.sleep(0.02)


@cache
def cgroup_parent(controller: str) -> Path | None:
    """Where this process may make `controller` cgroups, found by a trial one; None: nowhere."""
    for candidate in _candidates(controller):
        try:
            trial = _Cgroup(candidate, _settings(candidate, controller, TRIAL[controller]))
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


class RunCgroups:
    """A run's cgroups: one per hierarchy, each with the bounds of its controllers."""

    def __init__(self, groups: dict[str, _Cgroup]) -> None:
        self.of = groups  # controller -> its cgroup (one cgroup v2 serves both)

    def join(self) -> None:
        """Move the calling process in; run in the child between fork and exec."""
        for group in dict.fromkeys(self.of.values()):
            group.join()

    @property
    def bounds_memory(self) -> bool:
        return "memory" in self.of

    def refused_forks(self) -> int:
        group = self.of.get("pids")
        return group.count("pids.events", "max") if group else 0

    def oom_kills(self) -> int:
        """How many processes of the run the kernel killed at its memory bound."""
        group = self.of.get("memory")
        if group is None:
            return 0
        return max(group.count("memory.events", "oom_kill"),
                   group.count("memory.oom_control", "oom_kill"))  # fmt: skip

    def close(self) -> None:
        for group in dict.fromkeys(self.of.values()):
            group.close()


def open_cgroups(bounds: dict[str, int]) -> RunCgroups:
    """New cgroups bounding each controller of `bounds` (pids: processes, memory: bytes);
    a controller that cannot be had here is left out (RunCgroups.of says which hold)."""
    by_parent: dict[Path, dict[str, str]] = {}
    controllers: dict[Path, list[str]] = {}
    for controller, value in bounds.items():
        parent = cgroup_parent(controller)
        if parent is not None:
            by_parent.setdefault(parent, {}).update(_settings(parent, controller, value))
            controllers.setdefault(parent, []).append(controller)
    made: dict[str, _Cgroup] = {}
    for parent, settings in by_parent.items():
        try:
            group = _Cgroup(parent, settings)
        except OSError:
            continue
        made |= dict.fromkeys(controllers[parent], group)
    return RunCgroups(made)

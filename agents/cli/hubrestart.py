"""Restarting this home's hub the way whoever runs it would, so it reads trust.toml again.

The hub reads trust.toml only when it starts. Who restarts it depends on
who runs it, found from the process holding the room's lock:

    its parent is `bullpen up`          SIGUSR1 to `up`: it stops the hub and starts it
                                        again at once (a restart asked for, not a crash)
    its cgroup names a unit (systemd)   `systemctl --user restart <unit>`
    neither (`bullpen hub` by hand)     SIGHUP: it reads trust.toml again in place

Then it waits until a new hub (another pid) answers /health, or, after a
SIGHUP, until /health shows the fingerprint of trust.toml as it is now.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from agents.home import Home
from agents.runtime.up import RESTART_HUB_SIGNAL
from room.client import RoomClient
from room.errors import BullpenError
from room.jsonl import lock_path
from trust.table import digest

SYSTEMCTL_S = 60.0


@dataclass(frozen=True)
class Runner:
    kind: str  # "systemd", "up" or "alone"
    unit: str | None = None
    parent: int | None = None  # the pid of `bullpen up`, when it runs the hub


def classify(cgroup: str, parent_argv: list[str]) -> Runner:
    """Who runs a hub with this /proc/<pid>/cgroup, whose parent has this command line.

    `bullpen up` first: run as a unit itself, restarting that unit would restart everything.
    """
    if _is_up(parent_argv):
        return Runner("up")
    for line in cgroup.splitlines():
        last = line.rsplit("/", 1)[-1]
        if last.endswith(".service") and not last.startswith("user@"):
            return Runner("systemd", last)
    return Runner("alone")


def _is_up(argv: list[str]) -> bool:
    if "bullpen" not in [Path(word).name for word in argv] and "agents.cli" not in argv:
        return False
    values = {i + 1 for i, word in enumerate(argv) if word in ("--home", "--log-level")}
    return "up" in [w for i, w in enumerate(argv) if i not in values and not w.startswith("-")]


def hub_pid(home: Home) -> int | None:
    """The pid of the hub holding this home's room, when one is running (a jsonl room)."""
    if home.society.room.engine != "jsonl":
        return None
    try:
        pid = int(lock_path(home.room_path).read_text(encoding="ascii").strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if b"hub" in cmdline else None


def runner_of(pid: int) -> Runner:
    try:
        cgroup = Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8", errors="replace")
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        argv = Path(f"/proc/{parent}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError, IndexError):
        return Runner("alone")
    runner = classify(cgroup, [word for word in argv.split("\0") if word])
    return Runner(runner.kind, runner.unit, parent) if runner.kind == "up" else runner


async def _new_hub_answers(home: Home, old: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    async with RoomClient(home.society.hub.strict_url(), timeout=2.0) as client:
        while time.monotonic() < deadline:
            pid = hub_pid(home)
            if pid is not None and pid != old:
                try:
                    if (await client.health()).get("ok"):
                        return pid
                except (BullpenError, ValueError):
                    pass
            await asyncio.sleep(0.1)
    raise BullpenError(
        f"the hub did not come back within {timeout:g} s after the restart: look at its log "
        "(`journalctl --user -u bullpen-hub`, or `<home>/logs/hub.log` under `bullpen up`)"
    )


async def _reread(home: Home, timeout: float) -> None:
    wanted = digest(home.trust_file)
    deadline = time.monotonic() + timeout
    async with RoomClient(home.society.hub.strict_url(), timeout=2.0) as client:
        while time.monotonic() < deadline:
            try:
                if (await client.health()).get("trust") == wanted:
                    return
            except (BullpenError, ValueError):
                pass
            await asyncio.sleep(0.1)
    raise BullpenError(
        f"the hub did not show the new trust.toml within {timeout:g} s of SIGHUP (its /health "
        "`trust` is not the file's fingerprint): a hub from before SIGHUP reloads, or the file "
        "does not load (its log says why). Restart the hub, then run `bullpen trust check`"
    )


async def restart_hub(home: Home, timeout: float = 60.0) -> str:
    """Restart the running hub and wait for the new one; what was done, in words."""
    old = hub_pid(home)
    if old is None and home.society.room.engine != "jsonl":
        raise BullpenError(
            "this home's room is a stream, so its hubs hold no local lock to find them by: "
            "restart every hub of the room (`systemctl --user restart bullpen-hub`), then "
            "run `bullpen trust check`"
        )
    if old is None:
        raise BullpenError(
            "no hub is running for this home (no live process holds its room's lock), so "
            "none was restarted: the change takes effect when it starts (`bullpen up`, or "
            "`systemctl --user start bullpen-hub`)"
        )
    runner = runner_of(old)
    if runner.kind == "systemd":
        assert runner.unit is not None
        done = subprocess.run(
            ["systemctl", "--user", "restart", runner.unit],
            capture_output=True,
            text=True,
            timeout=SYSTEMCTL_S,
        )
        if done.returncode != 0:
            raise BullpenError(
                f"`systemctl --user restart {runner.unit}` failed ({done.stderr.strip()}); "
                "restart the hub yourself"
            )
        how = f"systemctl --user restart {runner.unit}"
    elif runner.kind == "up":
        assert runner.parent is not None
        # Asked of `up`, not done behind its back: a hub it saw die would be a crash to it,
        # restarted after a backoff that doubles with each promote.
        os.kill(runner.parent, RESTART_HUB_SIGNAL)
        how = f"`bullpen up` (pid {runner.parent}) restarted it at once"
    else:
        os.kill(old, signal.SIGHUP)
        await _reread(home, timeout)
        return f"the hub (pid {old}, started by hand) read trust.toml again (SIGHUP)"
    new = await _new_hub_answers(home, old, timeout)
    return f"{how} (new pid {new})"

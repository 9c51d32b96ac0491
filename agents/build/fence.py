"""How an untrusted test run is fenced: the spec and its fix are model-written code.

Every run gets a time limit and its own process group (killed whole, by the
group id this module created), resource limits (address space, CPU time,
file size, processes, no core dumps), its own pids and memory cgroups where the
kernel offers them (the process bound that holds for root, and the memory bound
that holds when a browser's address-space limit is lifted: agents/build/cgroups.py;
where no memory cgroup can be had for such a run, its output says memory is NOT bounded),
a bound on the total bytes it may add to its writable places (watched, the
run killed past it), an environment built from nothing
(no bullpen secret or token, no API key: only PATH, HOME, the locale, TMPDIR
and the runner's own variables), and, where bubblewrap works, a sandbox in
which the whole filesystem is read-only except the clone and the grind's
cache, every home and every place holding a secret or private data, wherever the
configuration puts it, is hidden (agents/privateplaces.py), /dev is read-only but a small /dev/shm
(SHM_MB), and there is no network.

A `cmd` code seat (agents/build/codeseat.py) runs through the same
`run_fenced`, with the network shared (a coding agent must reach its model)
and no resource limits (it is the operator's program, not model-written code).

Whether bwrap works is found by trial runs of both sandboxes, once per process: in a
container, as root, bubblewrap may be present and still unable to create
namespaces. Then the run falls back to the other fences, and the result
says so (`fence: rlimits`) rather than pretend.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from agents.build.bounds import MB, disk_used, watch_disk
from agents.build.cgroups import RunCgroups, open_cgroups
from agents.runtime.procgroup import feed, read_tail

__all__ = ["BWRAP", "RLIMITS", "FenceLimits", "Fenced", "bwrap_works", "choose", "run_fenced"]

BWRAP, RLIMITS = "bwrap", "rlimits"
OUTPUT_KEEP = 64 * 1024  # the tail of a run's output that is kept
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
SHM_MB = 64  # the test run's /dev/shm, a tmpfs of this size (the rest of /dev is read-only)


@dataclass(frozen=True)
class FenceLimits:
    timeout_s: float = 120.0
    memory_mb: int = 4096
    cpu_s: int = 300
    file_size_mb: int = 256
    processes: int = 4096
    disk_mb: int = 2048  # what one run may add to its writable places, all files together
    # RLIMIT_AS, when memory_mb cannot be it (a browser reserves far more than it holds);
    # memory_mb is then kept by the run's memory cgroup alone
    address_space_mb: int | None = None


@dataclass(frozen=True)
class Fenced:
    """One fenced run: its exit status (None: killed at the time limit), its output's tail."""

    returncode: int | None
    output: str
    timed_out: bool
    fence: str
    elapsed_s: float
    overran: str | None = None  # a bound the run broke and was killed for, said for a person


def _bwrap_argv(
    cwd: Path,
    writable: Sequence[Path],
    hidden: Sequence[Path],
    network: bool = False,
    open_base: bool = False,
    readonly: Sequence[Path] = (),
    shm_mb: int | None = None,
) -> list[str]:
    """The filesystem read-only (or, with `open_base`, as the user has it but `readonly`),
    `hidden` places empty (a folder) or blank (a file), `writable` places bound read-write;
    with `shm_mb`, /dev read-only but a /dev/shm of that size (a test run's: a tmpfs is
    memory no rlimit counts).

    A writable place inside a hidden one shows through (the clone in a hidden home);
    a hidden place inside a writable one is hidden again after it (a secret kept in a
    folder a seat may write)."""
    argv = ["bwrap", "--bind" if open_base else "--ro-bind", "/", "/"]
    argv += ["--dev", "/dev", "--proc", "/proc"]
    if shm_mb is not None:
        argv += ["--size", str(shm_mb * MB), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    for place in readonly:
        if place.exists():
            argv += ["--ro-bind", str(place), str(place)]
    folders = [place for place in hidden if place.is_dir()]
    for place in hidden:  # what lies in a hidden folder is gone with it
        if not any(folder in place.parents for folder in folders):
            argv += _hide(place)
    for place in writable:
        argv += ["--bind", str(place), str(place)]
    for place in hidden:  # inside a writable place (a seat's state folder): hidden again
        if any(open_ in place.parents for open_ in writable):
            argv += _hide(place)
    argv += ["--unshare-all", *(["--share-net"] if network else [])]
    return [*argv, "--die-with-parent", "--chdir", str(cwd), "--"]


def _hide(place: Path) -> list[str]:
    """bwrap's arguments that hide `place`: a folder empty, a file blank; else nothing."""
    if place.is_dir():
        return ["--tmpfs", str(place)]
    if place.is_file():
        return ["--ro-bind", "/dev/null", str(place)]
    return []


@cache
def bwrap_works() -> bool:
    """Trial runs: does bubblewrap start both sandboxes here, the test runs' (read-only, no
    network) and a code seat's guarded one (the filesystem open, the network shared)?"""
    if shutil.which("bwrap") is None:
        return False
    with tempfile.TemporaryDirectory(prefix="bullpen-fence-") as folder:
        place = Path(folder)
        trials = (
            _bwrap_argv(place, [place], [], shm_mb=SHM_MB),
            _bwrap_argv(place, [place], [], network=True, open_base=True),
        )
        for number, sandbox in enumerate(trials):
            mark = f"ok{number}"
            try:
                done = subprocess.run(
                    [*sandbox, "/bin/sh", "-c", f"echo fenced > {mark}"],
                    capture_output=True,
                    timeout=20,
                    env={"PATH": SAFE_PATH},
                )
            except (OSError, subprocess.TimeoutExpired):
                return False
            if done.returncode != 0 or not (place / mark).exists():
                return False
        return True


def choose(setting: str) -> str:
    """The fence a run gets: `bwrap` where it works (or is demanded), else `rlimits`."""
    if setting == RLIMITS:
        return RLIMITS
    if bwrap_works():
        return BWRAP
    if setting == BWRAP:
        raise RuntimeError(
            "[build] fence = 'bwrap', but bubblewrap cannot start a sandbox on this machine "
            "(is it installed, and may this user create namespaces?); set fence = 'auto' to "
            "fall back to the resource limits"
        )
    return RLIMITS


def clean_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    """The run's whole environment: nothing inherited, so no secret, token or key."""
    return {
        "PATH": SAFE_PATH,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(home),
        "PYTHONDONTWRITEBYTECODE": "1",
        **extra,
    }


def _limiter(limits: FenceLimits, cgroups: RunCgroups | None):  # type: ignore[no-untyped-def]
    def apply() -> None:
        if cgroups is not None:
            cgroups.join()  # before exec: every process the run makes counts against its bounds
        mb = 1024 * 1024
        for which, value in (
            (resource.RLIMIT_AS, (limits.address_space_mb or limits.memory_mb) * mb),
            (resource.RLIMIT_CPU, limits.cpu_s),
            (resource.RLIMIT_FSIZE, limits.file_size_mb * mb),
            (resource.RLIMIT_NPROC, limits.processes),
            (resource.RLIMIT_CORE, 0),
        ):
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, (value, value))

    return apply


async def run_fenced(
    argv: Sequence[str],
    *,
    cwd: Path,
    writable: Sequence[Path],
    env: dict[str, str],
    limits: FenceLimits,
    fence: str,
    hidden: Sequence[Path] = (),
    network: bool = False,
    resource_limits: bool = True,
    stdin: bytes | None = None,
    open_base: bool = False,
    readonly: Sequence[Path] = (),
) -> Fenced:
    """Run `argv` in `cwd` behind the fence; never raises for what the program does.

    Only `fence == BWRAP` adds the sandbox (with `network`, the host's network is
    shared); `resource_limits` applies `limits` (the rlimits, the pids and memory cgroups, the bytes
    the run may add to `writable`, a small read-only /dev) but the time limit, which
    always holds."""
    command = list(argv)
    if fence == BWRAP:
        shm = SHM_MB if resource_limits else None
        sandbox = _bwrap_argv(cwd, writable, hidden, network, open_base, readonly, shm)
        command = [*sandbox, *command]
    cgroups = None
    if resource_limits:
        bounds = {"pids": limits.processes, "memory": limits.memory_mb * MB}
        cgroups = await asyncio.to_thread(open_cgroups, bounds)
    try:
        return await _run(
            argv[0], command, cwd, writable, env, limits, fence, stdin, resource_limits, cgroups
        )
    finally:
        if cgroups is not None:
            await asyncio.to_thread(cgroups.close)  # whatever is left in them, escaped or not


async def _run(
    name: str,
    command: list[str],
    cwd: Path,
    writable: Sequence[Path],
    env: dict[str, str],
    limits: FenceLimits,
    fence: str,
    stdin: bytes | None,
    resource_limits: bool,
    cgroups: RunCgroups | None,
) -> Fenced:
    started = time.monotonic()
    start_bytes = await asyncio.to_thread(disk_used, writable) if resource_limits else 0
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed whole
            preexec_fn=_limiter(limits, cgroups) if resource_limits else None,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        why = getattr(exc, "strerror", None) or exc
        return Fenced(127, f"cannot start {name}: {why}", False, fence, 0.0)
    assert process.stdout is not None
    reader = asyncio.ensure_future(read_tail(process.stdout, OUTPUT_KEEP))
    feeder = asyncio.ensure_future(feed(process.stdin, stdin or b""))

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    watcher = (
        asyncio.ensure_future(watch_disk(writable, start_bytes, limits.disk_mb, kill))
        if resource_limits
        else None
    )
    timed_out = False
    try:
        await asyncio.wait_for(process.wait(), limits.timeout_s)
    except TimeoutError:
        timed_out = True
    finally:
        kill()  # leave nothing behind, finished or not
        if process.returncode is None:
            await process.wait()
        feeder.cancel()  # a program that never read its stdin is not waited for
    added = await _stop_watch(watcher, writable, start_bytes)
    try:
        output = await asyncio.wait_for(reader, 5)
    except TimeoutError:  # a grandchild outside the group holds the pipe: stop reading
        reader.cancel()
        output = b""
    text = output.decode("utf-8", "replace")
    if timed_out:
        text += f"\n[killed: the run overran its {limits.timeout_s:g} s limit]"
    overran = None
    if added is not None and added > limits.disk_mb * MB:
        overran = (
            f"the run wrote {added / MB:.0f} MB into {', '.join(str(p) for p in writable)}, "
            f"more than [build] disk_mb = {limits.disk_mb} allows in one run, and was killed"
        )
        text += f"\n[killed: {overran}]"
    if cgroups is not None:
        text += _cgroup_notes(limits, cgroups)
    return Fenced(
        None if timed_out or overran else process.returncode,
        text,
        timed_out,
        fence,
        time.monotonic() - started,
        overran,
    )


def _cgroup_notes(limits: FenceLimits, cgroups: RunCgroups) -> str:
    """What the run's cgroups refused or killed, and a memory bound that could not be kept."""
    notes = ""
    refused = cgroups.refused_forks()
    if refused:
        notes += (
            f"\n[the run hit its bound of {limits.processes} processes ([build] processes): "
            f"{refused} forks were refused]"
        )
    killed = cgroups.oom_kills()
    if killed:
        notes += (
            f"\n[the run hit its memory bound of {limits.memory_mb} MB ([build] memory_mb): "
            f"the kernel killed {killed} of its processes]"
        )
    lifted = (limits.address_space_mb or 0) > limits.memory_mb
    if lifted and not cgroups.bounds_memory:
        notes += (
            f"\n[memory NOT bounded: this runner's address-space limit is lifted (a browser "
            f"reserves far more than it holds), and no memory cgroup can be made here to keep "
            f"[build] memory_mb = {limits.memory_mb} MB instead; run the grinder where the "
            "cgroup memory controller is delegated to it (docs/build.md, the fence)]"
        )
    return notes


async def _stop_watch(
    watcher: asyncio.Future[int] | None, writable: Sequence[Path], start: int
) -> int | None:
    """The bytes the run added: what the watcher killed it at, else measured now."""
    if watcher is None:
        return None
    if watcher.done() and not watcher.cancelled():
        return watcher.result()
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher
    return await asyncio.to_thread(disk_used, writable) - start

"""The bounds a test run's fence keeps that rlimits could not: processes as root, total bytes.

Real runs of real specs behind the grind's fence (bwrap where it works). As root,
RLIMIT_NPROC binds nothing; the run's own pids cgroup does: 300 forks under
`processes = 128` see refusals. RLIMIT_FSIZE bounds each file; `[build] disk_mb`
bounds what one run adds to the clone and its cache, all files together: a run
writing past it is killed and the grind's step fails red naming the bound.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents.build.bounds import pids_cgroups, pids_parent
from agents.build.config import BuildConfig
from agents.build.fence import BWRAP, RLIMITS, FenceLimits, choose, clean_env, run_fenced
from agents.build.routing import by_name
from agents.build.runs import Workspace, run_spec
from room.errors import StepFailed

FENCE = choose("auto")
PYTHON = by_name("python")
MB = 1024 * 1024


def _space(tmp_path: Path, fence: str = FENCE) -> Workspace:
    clone, cache = tmp_path / "clone", tmp_path / "clone.cache"
    clone.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    return Workspace(clone, cache, fence)


def _run(space: Workspace, spec: str, config: BuildConfig):  # type: ignore[no-untyped-def]
    (space.folder / "test_spec.py").write_text(spec)
    return asyncio.run(run_spec(config, PYTHON, space, "test_spec.py", spec))


FORKS = """\
import json, os, time


def test_forks():
    made = refused = 0
    children = []
    for _ in range(300):
        try:
            pid = os.fork()
        except OSError:
            refused += 1
            continue
        if pid == 0:
            time.sleep(2)
            os._exit(0)
        made += 1
        children.append(pid)
    json.dump({"made": made, "refused": refused}, open("forks.json", "w"))
    for pid in children:
        os.waitpid(pid, 0)
"""


@pytest.mark.parametrize("fence", sorted({FENCE, RLIMITS}))
def test_the_process_bound_holds_for_root(tmp_path: Path, fence: str) -> None:
    """300 forks under processes = 128: refusals, at most 128 made, whoever runs the grinder."""
    assert os.geteuid() != 0 or pids_cgroups(), "root, and no pids cgroup: nothing binds"
    space = _space(tmp_path, fence)
    done = _run(space, FORKS, BuildConfig(processes=128))
    seen = json.loads((space.folder / "forks.json").read_text())
    assert seen["refused"] > 0 and seen["made"] < 128, seen
    assert seen["made"] + seen["refused"] == 300
    if pids_cgroups():
        assert "[the run hit its bound of 128 processes ([build] processes)" in done.output
        parent = pids_parent()
        assert parent is not None and not list(parent.glob(f"bullpen-run-{os.getpid()}-*"))


def test_a_process_that_left_the_group_goes_with_the_run(tmp_path: Path) -> None:
    """A child that made its own session outlives a process-group kill; the run's cgroup
    lists it, and it is killed when the run ends (under the bare rlimits fence too)."""
    assert pids_cgroups(), "no pids cgroup here: an escaped child would outlive its run"
    space = _space(tmp_path, RLIMITS)
    marker = f"61.{os.getpid()}{len(str(tmp_path))}"  # a sleep no one else runs
    script = f"import subprocess\nsubprocess.Popen(['setsid', 'sleep', '{marker}'])\n"
    asyncio.run(
        run_fenced(
            [sys.executable, "-c", script], cwd=space.folder, writable=[space.folder],
            env=clean_env(space.cache, {}), limits=FenceLimits(timeout_s=20), fence=RLIMITS,
        )
    )  # fmt: skip
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert left.stdout.strip() == ""


WRITER = """\
import os


def test_fill():
    block = b"x" * (1024 * 1024)
    for number in range(2000):
        with open(f"fill-{number}.bin", "wb") as out:
            out.write(block)
"""


def test_the_bytes_a_run_adds_are_bounded_in_total(tmp_path: Path) -> None:
    """2,000 files of 1 MB each, none over file_size_mb: the run is killed past disk_mb and
    the step fails naming the bound; the clone holds far less than the 2 GB asked for."""
    space = _space(tmp_path)
    with pytest.raises(StepFailed) as failed:
        _run(space, WRITER, BuildConfig(disk_mb=32, file_size_mb=2))
    message = failed.value.message
    assert "the code under test broke a bound of its fence" in message
    assert "more than [build] disk_mb = 32 allows in one run, and was killed" in message
    held = sum(p.stat().st_size for p in space.folder.glob("fill-*.bin"))
    assert 32 * MB < held < 1024 * MB


SCRATCH = """\
def test_dev():
    open("/dev/planted", "w").write("x")


def test_shm():
    with open("/dev/shm/fill", "wb") as out:
        out.write(b"x" * (200 * 1024 * 1024))
"""


def test_the_sandbox_dev_is_read_only_and_its_shm_small(tmp_path: Path) -> None:
    """/dev is a tmpfs no rlimit counts: read-only in the sandbox, but a small /dev/shm."""
    space = _space(tmp_path)
    done = _run(space, SCRATCH, BuildConfig())
    if FENCE != BWRAP:
        assert done.fence == RLIMITS  # no sandbox: /dev is the host's, as the fence says
        return
    assert (done.passing, done.total) == (0, 2), done.output
    assert "Read-only file system" in done.output and "No space left on device" in done.output

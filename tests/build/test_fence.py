"""The fence around a model-written test run: real runs of real specs, bwrap where it works.

On a machine where bubblewrap cannot create namespaces (a container, as root) the
bwrap assertions become assertions about the fallback: the run says `fence: rlimits`
and still sees no secret; the resource limits and the time limit hold either way.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agents.build.config import BuildConfig
from agents.build.fence import (
    BWRAP,
    RLIMITS,
    FenceLimits,
    bwrap_works,
    choose,
    clean_env,
    run_fenced,
)
from agents.build.routing import by_name
from agents.build.runs import Workspace, run_spec

FENCE = choose("auto")
PYTHON = by_name("python")


def _space(tmp_path: Path, fence: str = FENCE) -> Workspace:
    clone, cache = tmp_path / "clone", tmp_path / "clone.cache"
    clone.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    return Workspace(clone, cache, fence)


def _run(space: Workspace, spec: str, config: BuildConfig | None = None):  # type: ignore[no-untyped-def]
    (space.folder / "test_spec.py").write_text(spec)
    return asyncio.run(run_spec(config or BuildConfig(), PYTHON, space, "test_spec.py", spec))


def test_the_fence_is_chosen_by_a_trial_run() -> None:
    assert (BWRAP if bwrap_works() else RLIMITS) == FENCE
    assert choose("rlimits") == RLIMITS
    if not bwrap_works():
        with pytest.raises(RuntimeError, match="bubblewrap cannot start a sandbox"):
            choose("bwrap")


def test_a_run_that_tries_the_network_fails_inside_the_fence(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        spec = f"import socket\n\ndef test_net():\n    socket.create_connection(('127.0.0.1', {port}), 2).close()\n"
        fenced = _run(_space(tmp_path), spec)
        bare = _run(_space(tmp_path / "bare", RLIMITS), spec) if FENCE == BWRAP else None
    assert fenced.fence == FENCE
    if FENCE == BWRAP:
        assert not fenced.green and "Error" in fenced.output  # no network in the sandbox
        assert bare is not None and bare.green  # the same spec outside bwrap reaches it
    else:
        assert fenced.fence == RLIMITS


def test_a_run_that_writes_outside_the_clone_fails_inside_the_fence(tmp_path: Path) -> None:
    victim = tmp_path / "outside.txt"
    spec = f"def test_write():\n    open({str(victim)!r}, 'w').write('x')\n\ndef test_inside():\n    open('in.txt', 'w').write('x')\n"
    space = _space(tmp_path)
    done = _run(space, spec)
    assert (space.folder / "in.txt").exists()  # the clone is writable
    if FENCE == BWRAP:
        assert (done.passing, done.total) == (1, 2)
        assert "Read-only file system" in done.output and not victim.exists()
    else:
        assert done.fence == RLIMITS and victim.exists()  # the fallback does not fence writes


def test_the_run_sees_no_secret_and_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-the-spec")
    monkeypatch.setenv("BULLPEN_HOME", "/somewhere/secret")
    spec = "import os, json\n\ndef test_env():\n    open('env.json', 'w').write(json.dumps(dict(os.environ)))\n"
    space = _space(tmp_path)
    done = _run(space, spec)
    assert done.green and done.fence == FENCE
    import json

    seen = json.loads((space.folder / "env.json").read_text())
    assert "OPENAI_API_KEY" not in seen and not any(k.startswith("BULLPEN_") for k in seen)
    assert "sk-test-not-for-the-spec" not in json.dumps(seen)
    assert set(clean_env(tmp_path, {})) <= set(seen)


def test_resource_limits_and_the_time_limit_hold(tmp_path: Path) -> None:
    """A run may not write a file past [build] file_size_mb; one that overruns is killed with
    its whole process group, a child it started included."""
    big = "def test_big():\n    open('big.bin', 'wb').write(b'x' * (3 * 1024 * 1024))\n"
    space = _space(tmp_path)
    done = _run(space, big, BuildConfig(file_size_mb=1))
    assert not done.green
    assert (space.folder / "big.bin").stat().st_size <= 1024 * 1024
    marker = f"60.{os.getpid()}{len(str(tmp_path))}"  # a sleep no one else runs
    script = f"import subprocess, time\nsubprocess.Popen(['sleep', '{marker}'])\ntime.sleep(60)\n"
    ran = asyncio.run(
        run_fenced(
            [sys.executable, "-c", script], cwd=space.folder, writable=[space.folder, space.cache],
            env=clean_env(space.cache, {}), limits=FenceLimits(timeout_s=2), fence=FENCE,
        )
    )  # fmt: skip
    assert ran.timed_out and ran.returncode is None and "overran its 2 s limit" in ran.output
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert left.stdout.strip() == ""  # the child went with its group

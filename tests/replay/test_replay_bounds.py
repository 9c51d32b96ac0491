"""A replay's private copy is bounded before it writes: a sparse 1.5 GiB file among the paths a
step's ask names is refused by its size, and nothing lands in the temporary folder first.

A real backpass run (hub, foreman, lurkers, git) is recorded, the society stopped, and a
sparse file (1.5 GiB to a copy, a few bytes on disk) put in its traces folder; the replay runs
with its own TMPDIR, whose usage a thread watches the whole time.
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import threading
from pathlib import Path

from tests.replay.test_replay_writes import recorded_backpass
from tests.support import bullpen_argv

SPARSE = 3 * 2**29  # 1.5 GiB


def usage(folder: Path) -> int:
    """Bytes allocated under `folder` now (files come and go while it is walked)."""
    total = 0
    for place, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(place, name)).st_blocks * 512
    return total


def test_a_sparse_file_in_a_replayed_steps_paths_is_refused_before_a_byte_is_copied(
    tmp_path: Path,
) -> None:
    society, thread = recorded_backpass(tmp_path)
    sparse = society.root / "traces" / "zz-huge.md"
    with open(sparse, "wb") as handle:
        handle.truncate(SPARSE)
    assert os.stat(sparse).st_blocks * 512 < 2**20  # sparse: nothing allocated on disk
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    most = [0]
    finished = threading.Event()

    def watch() -> None:
        while not finished.is_set():
            most[0] = max(most[0], usage(scratch))
            finished.wait(0.02)

    def small_files() -> None:  # the old copy would write 1.5 GiB here; never let it
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 2**20, 64 * 2**20))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        replay = subprocess.run(
            bullpen_argv(society.root, "replay", thread, "--step", "list", "--json"),
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "TMPDIR": str(scratch)},
            preexec_fn=small_files,
        )
    finally:
        finished.set()
        watcher.join(10)
    assert replay.returncode == 2, replay.stdout + replay.stderr[-2000:]
    assert "Traceback" not in replay.stderr, replay.stderr[-2000:]
    assert "1.5 GiB" in replay.stderr and "bound of 512.0 MiB" in replay.stderr, replay.stderr
    assert str(society.root / "traces") in replay.stderr, replay.stderr
    assert most[0] < 2**20, f"{most[0]} bytes were written to the replay's temp dir"
    assert usage(scratch) == 0  # and nothing left behind

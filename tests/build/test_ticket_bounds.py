"""`bullpen build` refuses a ticket by its size before reading it: a 3 GiB ticket (sparse, so
the test costs no disk) was read whole, 6.3 GB of memory; now it is exit 2 at once."""

from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path

from tests.support import Society, bullpen_argv


def test_a_ticket_over_the_bound_is_refused_by_its_size_quickly_and_small(tmp_path: Path) -> None:
    society = Society(tmp_path / "home")
    huge = tmp_path / "ticket.md"
    with open(huge, "wb") as handle:
        handle.truncate(3 * 2**30)

    def bounded() -> None:  # the old read would take 3 GiB; let it fail rather than swap
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    started = time.monotonic()
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as errors:
        child = subprocess.Popen(
            bullpen_argv(society.root, "build", str(huge)),
            stdout=out,
            stderr=errors,
            preexec_fn=bounded,
        )
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not its siblings'
        child.returncode = os.waitstatus_to_exitcode(status)
    took = time.monotonic() - started
    out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    assert child.returncode == 2, out + err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert str(huge) in err and "3221225472 bytes, over the bound of 60 KiB" in err, err
    assert took < 30, took
    assert usage.ru_maxrss < 400 * 1024, f"{usage.ru_maxrss} KiB resident"
    assert os.path.getsize(huge) == 3 * 2**30  # nothing was done to it

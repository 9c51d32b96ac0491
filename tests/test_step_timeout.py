"""A blocking step that overruns its timeout is stopped, not abandoned (issue 13 §4)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support import Society, add_nick, wait_for
from tests.test_lurker import say, wait_reply


def children(pid: int) -> set[int]:
    """The live child processes of `pid`, from /proc (every thread's list)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            listed = (task / "children").read_text()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        found |= {int(child) for child in listed.split()}
    return found


def gone(pid: int) -> bool:
    """No process `pid`, not even a zombie waiting to be reaped."""
    return not os.path.exists(f"/proc/{pid}")


def test_a_blocking_step_that_spins_forever_is_killed_at_its_timeout(
    society: Society, tmp_path: Path
) -> None:
    """The lurker replies FAILED at the timeout, and the process that burned CPU is gone."""
    add_nick(society.root, "spinner", handler="tests.tools.steps:spin", timeout_s=1)
    marker = tmp_path / "spin.pid"
    society.start_hub()
    lurker = society.start_lurker("spinner", env={"BULLPEN_TEST_SPIN_PID": str(marker)})
    ask = say(society, "@spinner", "spin")
    reply = wait_reply(society, ask["id"])
    assert reply["body"].startswith("[spinner FAILED — timed out after 1 s")
    burner = int(wait_for(lambda: marker.exists() and marker.read_text(), 10, "the spin pid"))
    assert burner != lurker.pid  # it ran in a child, not on a thread of the lurker
    wait_for(lambda: gone(burner), 10, "the spinning step's process to be gone")
    assert children(lurker.pid) == set()
    again = say(society, "@spinner", "spin again")  # the lurker goes on answering
    assert wait_reply(society, again["id"])["data"]["failed"] is True
    assert lurker.stop() == 0

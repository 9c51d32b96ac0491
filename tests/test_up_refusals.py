"""`bullpen up` run twice on one home: the second refuses, and nothing answers twice."""

from __future__ import annotations

import subprocess

from tests.support import Society, bullpen_argv, start_up
from tests.test_lurker import replies_to, say, wait_reply


def test_a_second_up_refuses_and_nothing_answers_twice(society: Society) -> None:
    """With the society already up, a second `bullpen up` exits 1 before starting anything."""
    up = start_up(society, ready=True)
    try:
        second = subprocess.run(
            bullpen_argv(society.root, "up"), capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 1, second.stderr
        assert "already answers" in second.stderr and "--no-hub" in second.stderr
        assert "lurkers up" not in second.stderr
        ask = say(society, "@echo", "only once")
        wait_reply(society, ask["id"], 30)
        assert len(replies_to(society, ask["id"])) == 1
    finally:
        up.stop()

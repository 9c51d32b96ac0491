"""A pytest run stopped with SIGTERM stops the processes its fixtures started (tests/stopsignal.py).

Run for real: a pytest process of its own runs a test that leaves SIGTERM at its
default (as a command run in-process does), then a test whose fixture starts a
process in a session of its own (as the suite's servers are) and waits; this
test sends that pytest SIGTERM and checks the started process is gone when it
has exited, and that it said why it stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support import pid_alive, wait_for

REPO = Path(__file__).resolve().parents[1]

INNER = """
import os
import signal
import time
from pathlib import Path

import pytest

from tests.support import Proc


@pytest.fixture
def server(tmp_path):
    proc = Proc(["sleep", "600"], tmp_path / "server.log")
    yield proc
    proc.stop()
    Path(os.environ["STOPPED_FILE"]).write_text("stopped")


def test_takes_sigterm_and_leaves_it_at_the_default():
    # as a command run in-process does when asyncio removes its StopSignals handler
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_waits(server):
    Path(os.environ["PID_FILE"]).write_text(str(server.pid))
    time.sleep(600)  # until the run is stopped: the outer test sends SIGTERM
"""


def test_sigterm_stops_what_the_fixtures_started(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    pid_file, stopped_file = tmp_path / "pid", tmp_path / "stopped"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # only the plugin under test: a quick start
        "PID_FILE": str(pid_file),
        "STOPPED_FILE": str(stopped_file),
    }
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.stopsignal", "test_inner.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    server = 0
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text() != "", 60, "the inner test")
        server = int(pid_file.read_text())
        assert pid_alive(server)
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(10)
        if server and pid_alive(server):
            os.kill(server, signal.SIGKILL)
    assert "stopped by SIGTERM" in out, out
    assert stopped_file.read_text() == "stopped", out  # the fixture's teardown ran
    # Proc.stop stopped and reaped it: still running, it would be an orphan nobody stopped
    assert not pid_alive(server), f"the fixture's process {server} outlived the stopped run"

"""Issue 35: Ctrl-C is exit 130 everywhere; systemd's SIGTERM is a clean stop, exit 0.

Every long-running command (the hub, a lurker, `up`, the web view, the gateway, `tail`)
stops the same graceful way on either signal; a shell or a script under `set -e` tells
an interrupted command from a finished one by the 130 (room/stopsignals.py).
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest

from tests.gateway.helpers import GatewayHome
from tests.support import Proc, Society, free_port, start_up, wait_for
from tests.test_lurker import say
from tests.web.browser import add_web, wait_web

EXPECTED = [(signal.SIGINT, 130), (signal.SIGTERM, 0)]
IDS = ["ctrl-c", "sigterm"]


def _ends_with(proc: Proc, sig: int, code: int, what: str) -> None:
    proc.signal(sig)
    wait_for(lambda: not proc.alive(), 30, f"{what} to stop on {signal.Signals(sig).name}")
    assert proc.proc.returncode == code, proc.own_output()
    assert "Traceback" not in proc.own_output()


def _started(society: Society, name: str) -> Proc:
    """The command `name`, running and ready, in a home whose hub runs (except for `up`,
    which starts its own)."""
    if name == "up":
        return start_up(society, nicks=("echo",))
    society.start_hub()
    starts: dict[str, Callable[[], Proc]] = {
        "hub": lambda: society.procs[0],
        "lurk": lambda: society.start_lurker("echo"),
        "tail": lambda: society.spawn("tail", "tail"),
    }
    if name == "web":
        base = add_web(society)
        web = society.spawn("web", "web")
        wait_web(base)
        return web
    if name == "gateway":
        gateway = GatewayHome(society)
        # A backend that is not running: the gateway serves (and says so) all the same.
        gateway.configure(
            {"local": {"base_url": f"http://127.0.0.1:{free_port()}/v1", "prefixes": ["fake"]}}
        )
        return gateway.start()
    proc = starts[name]()
    if name == "tail":  # following: it shows a line posted after it started
        say(society, "@echo", "seen by tail")
        wait_for(lambda: "seen by tail" in proc.own_output() or not proc.alive(), 20, "tail")
    return proc


@pytest.mark.parametrize(("sig", "code"), EXPECTED, ids=IDS)
@pytest.mark.parametrize("name", ["hub", "lurk", "up", "web", "gateway"])
def test_a_long_running_command_exits_130_on_ctrl_c_and_0_on_sigterm(
    society: Society, name: str, sig: int, code: int
) -> None:
    proc = _started(society, name)
    assert proc.alive(), proc.own_output()
    _ends_with(proc, sig, code, f"bullpen {name}")


def test_tail_exits_130_on_ctrl_c(society: Society) -> None:
    """`tail` is a terminal's command (no unit runs it): Ctrl-C ends it with 130, not 0."""
    proc = _started(society, "tail")
    assert proc.alive(), proc.own_output()
    _ends_with(proc, signal.SIGINT, 130, "bullpen tail")

"""A test run stopped with SIGTERM tears down as one stopped with Ctrl-C.

The servers tests start (hubs, lurkers, nats-server, llama-server) run in
sessions of their own, so a signal to the run's process group never reaches
them before their fixtures have stopped them in order. Ctrl-C raises
KeyboardInterrupt, and pytest then runs every fixture's teardown; SIGTERM
(what `timeout`, a CI runner's cancel and `kill` send) would end the process
at once and leave those servers running. So SIGTERM raises KeyboardInterrupt
too, in the run's process and in each xdist worker, which loads this plugin
with the suite's conftest.
"""

from __future__ import annotations

import signal
from types import FrameType

import pytest


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    signal.signal(signal.SIGTERM, _interrupt)

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
import threading
from types import FrameType

import pytest


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


def _take_sigterm() -> None:
    """SIGTERM raises KeyboardInterrupt here (only the main thread may set a handler)."""
    on_main = threading.current_thread() is threading.main_thread()
    if on_main and signal.getsignal(signal.SIGTERM) is not _interrupt:
        signal.signal(signal.SIGTERM, _interrupt)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    _take_sigterm()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Again before each test: code a test ran in this process may have taken SIGTERM for
    itself (a command's StopSignals on asyncio's loop) and left it at the default."""
    _take_sigterm()

"""Which signal ended a long-running command, and the exit code that means.

systemd stops a unit with SIGTERM: that is the end it was asked for, so the command
exits 0 and the journal shows no failure. Ctrl-C at a terminal sends SIGINT: a shell,
and a script that runs `bullpen up` or `bullpen tail` under `set -e` or `timeout`,
expects an interrupted command to exit 128 + 2 = 130, as every bullpen command does
when interrupted. The hub, the gateway, the web view, `up` and the lurkers all stop
the same graceful way on either signal; only their exit code tells the two apart.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

INTERRUPTED = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """Calls `on_stop` on the first SIGTERM or SIGINT and remembers which it was."""

    def __init__(self) -> None:
        self.received: int | None = None

    def install(self, loop: asyncio.AbstractEventLoop, on_stop: Callable[[], object]) -> None:
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._received, sig, on_stop)

    def remove(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)

    def _received(self, sig: int, on_stop: Callable[[], object]) -> None:
        if self.received is None:
            self.received = sig
        on_stop()

    @property
    def interrupted(self) -> bool:
        return self.received == signal.SIGINT

    def exit_code(self, code: int) -> int:
        """`code` for a clean end, except 130 for one that Ctrl-C asked for; a failure's
        own code is never hidden."""
        return INTERRUPTED if code == 0 and self.interrupted else code

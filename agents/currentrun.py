"""The run a process is working for, as a context variable: stdlib only, so the lurker's
lean import path and the seats can both use it.

A lurker sets CURRENT_RUN to the thread of the message it is handling, in the handler's
own task; a seat that goes through the model gateway names it in the `x-bullpen-run`
header, so the gateway's recording keeps one run's answers apart from another's
(agents/gateway/recording.py).
"""

from __future__ import annotations

from contextvars import ContextVar

CURRENT_RUN: ContextVar[str | None] = ContextVar("bullpen_current_run", default=None)

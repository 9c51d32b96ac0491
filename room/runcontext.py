"""The run (the room thread) a task is working for, as a context variable: in the room
layer and stdlib only, so the lurker and the seats, which may not import each other, both
use it, and loading it costs a lurker nothing.

A lurker sets CURRENT_RUN to the thread of the message it is handling, in the handler's
own task; a seat that goes through the model gateway names it in the `x-bullpen-run`
header, so the gateway's recording keeps one run's answers apart from another's
(agents/gateway/recording.py).
"""

from __future__ import annotations

from contextvars import ContextVar

CURRENT_RUN: ContextVar[str | None] = ContextVar("bullpen_current_run", default=None)

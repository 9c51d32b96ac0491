"""The one error memory raises on purpose, under room.errors' tree:

    BullpenError
    └── StepFailed
        └── Refused     a save or a query memory will not take; nothing was changed

A Refused raised in the librarian's step becomes its `[librarian FAILED — …]`
reply; the CLI prints it and exits 2 (a 4xx: the input was wrong, not the system).
"""

from __future__ import annotations

from room.errors import StepFailed

__all__ = ["Refused", "Unavailable"]


class Refused(StepFailed):
    """Bad input: an empty or oversized text, a namespace outside /bullpen or undeclared,
    a malformed query. The message says what was wrong and what to do."""

    code = "memory_refused"
    exit_code = 2


class Unavailable(StepFailed):
    """The index cannot be read (not built yet, unreadable, locked)."""

    code = "memory_unavailable"

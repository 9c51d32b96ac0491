"""The two-session threshold for a new lesson, checked in code against the ledger.

The synthesis prompt asks the model to add a bullet only for an observation
seen in at least `min_sessions` sessions; a model does not always listen,
and one session's accident would then become a standing rule. So every
`add` the synthesis answers is checked here before anything is written:
the ledger lines it cites (its `sources`) must together have been seen in
at least `min_sessions` distinct sessions, counted from their sightings.
An `add` that cites nothing rests on nothing and is held back too.

A held-back edit is not applied, not committed and not lost: the funnel
and the PR body name it and why, and its ledger lines stay open, so a
later session that corroborates them lets the next run propose it again.
`replace` and `remove` change what memory already holds and are the
reviewer's to judge; the threshold is about new lessons.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agents.backpass.ledger import Entry
from agents.backpass.schemas import Edit

__all__ = ["Held", "hold_back", "sessions_of"]


@dataclass(frozen=True)
class Held:
    """An edit held back, and why."""

    edit: Edit
    sessions: int
    reason: str

    def line(self) -> str:
        return f"{self.edit.repo} add “{self.edit.text}” — {self.reason}"


def sessions_of(sources: Iterable[str], entries: Sequence[Entry]) -> set[str]:
    """The distinct sessions that saw any of the cited ledger lines."""
    by_id = {entry.id: entry for entry in entries}
    seen: set[str] = set()
    for source in sources:
        entry = by_id.get(source)
        if entry is not None:
            seen.update(entry.sessions)
    return seen


def hold_back(
    edits: Sequence[Edit], entries: Sequence[Entry], min_sessions: int
) -> tuple[list[Edit], list[Held]]:
    """(the edits that may be applied, the adds held back for too few sessions)."""
    kept: list[Edit] = []
    held: list[Held] = []
    for edit in edits:
        if edit.op != "add":
            kept.append(edit)
            continue
        seen = sessions_of(edit.sources, entries)
        if len(seen) >= min_sessions:
            kept.append(edit)
            continue
        if not edit.sources:
            reason = "it cites no ledger line, so nothing shows a session saw it"
        else:
            plural = "session" if len(seen) == 1 else "sessions"
            reason = (
                f"its ledger lines ({', '.join(edit.sources)}) were seen in {len(seen)} "
                f"{plural}; a new lesson needs {min_sessions}. They stay open"
            )
        held.append(Held(edit, len(seen), reason))
    return kept, held

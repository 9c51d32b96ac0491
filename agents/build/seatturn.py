"""What one grind iteration tells its code seat, and what it remembers for the next.

Each iteration looks at the clone afresh (the previous tier's change is in
it), so the seat is shown the files as they are now. What carries from one
iteration to the next is the seat's own last change (the diff of the commit
the grind made of it) and, when its last answer did not apply, why: a model
that answered a search text not in the file is told so, and shown the file
again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.build.codeseat import Shown
from agents.build.prompts import CodeContext, code_prompt
from agents.build.repomap import view_repo
from agents.git.apart import Apart, apart_git

if TYPE_CHECKING:
    from agents.memory.lessons import Lesson

__all__ = ["Carried", "own_change", "turn_prompt"]


@dataclass
class Carried:
    """What the next iteration is told about this one."""

    last_change: str = ""
    refused: str | None = None
    lessons_shown: list[str] = field(default_factory=list)  # ids some code seat was given


def turn_prompt(
    clone: Path,
    ticket: dict[str, Any],
    spec: tuple[str, str],  # (relative path, text)
    seat: tuple[str, str, int],  # (tier, kind, iteration)
    last_output: str,
    carried: Carried,
    lessons: list[Lesson],
    budget_tokens: int,
) -> tuple[str, Shown]:
    """The prompt of one turn and what it showed in full; notes the lessons handed over."""
    spec_relative, spec_text = spec
    tier, kind, iteration = seat
    targets = [str(t) for t in ticket.get("targets") or []]
    view = view_repo(clone, spec_relative, spec_text, targets, budget_tokens)
    context = CodeContext(
        tier=tier,
        iteration=iteration,
        kind=kind,
        spec_relative=spec_relative,
        spec_text=spec_text,
        last_output=last_output,
        view=view,
        last_change=carried.last_change,
        refused=carried.refused,
        lessons=lessons,
        memory=list(ticket.get("memory") or []),  # recalled by the step (steps.grind_spec)
    )
    for lesson in lessons:
        if lesson.id not in carried.lessons_shown:
            carried.lessons_shown.append(lesson.id)
    return code_prompt(ticket, context), Shown(view.shown, {spec_relative})


def own_change(repo: Apart, head: str, changed: list[str]) -> str:
    """The diff of the commit `head` the grind just made of the seat's change ('' if none)."""
    if not changed:
        return ""
    done = apart_git(repo, "show", "--format=", "--no-color", head, check=False)
    return done[1].decode("utf-8", "replace")

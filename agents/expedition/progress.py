"""One plain line of progress per event of an expedition's thread, for the operator's stderr.

Each line names its step of the whole run (`step 3/6 score: batch 1 of 2`): no escapes or
redraws, and a step's body is stripped of control characters, so a pipe, a log file or
the journal reads exactly what a terminal shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agents.expedition.pipeline import STEP_NUMBERS
from agents.wording import counted
from room.message import Message, bare

FOREMAN = "foreman"
LAST_STEP = max(STEP_NUMBERS.values())


_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|.)?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
_STEP_AT_START = re.compile(r"^step \d+\b")


def plain(text: str) -> str:
    """Text as one plain line: terminal escapes dropped, other control characters spaced."""
    return " ".join(_CONTROL.sub(" ", _ESCAPE.sub("", text)).split())


def step_label(number: int) -> str:
    """`step 3/6`: which step, of the whole run's, numbered 0-6 as in the spec."""
    return f"step {number}/{LAST_STEP}"


@dataclass
class Progress:
    """Turns the thread's traffic into one plain line per event, for stderr.

    The foreman's asks carry their step number; a reply is labelled with the
    step of the ask it answers, so every line says where the run is.
    """

    foreman: str = FOREMAN
    batches_in: dict[str, set[int]] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)  # ask id -> step number

    def line(self, message: Message) -> str | None:
        data = message.data or {}
        if message.from_ == self.foreman and message.type == "ask":
            return f"-> @{bare(message.to)}: {self._asked(message)}"
        if message.type != "reply" or bare(message.to) != self.foreman:
            return None
        step = self.steps.get(message.in_reply_to or "")
        label = f"{step_label(step)}: " if step is not None else ""
        first = plain(message.body.strip().splitlines()[0]) if message.body.strip() else ""
        if data.get("failed"):
            return f"<- @{message.from_}: {label}{first}"
        if "scores" in data and "of" in data:
            round_ = str(data.get("round", ""))
            seen = self.batches_in.setdefault(round_, set())
            seen.add(int(data.get("batch", 0)))
            of = counted(int(data["of"]), "batch", "batches")
            score = step_label(STEP_NUMBERS["score"])
            return f"<- @{message.from_}: {score} score: {len(seen)} of {of} in"
        seat = f" (seat {plain(str(data['seat']))})" if data.get("seat") else ""
        return f"<- @{message.from_}: {label}{first[:200]}{seat}"

    def _asked(self, ask: Message) -> str:
        body = plain(ask.body)
        step = (ask.data or {}).get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            return body
        self.steps[ask.id] = step
        if _STEP_AT_START.match(body):
            return _STEP_AT_START.sub(step_label(step), body, count=1)
        return f"{step_label(step)}: {body}"

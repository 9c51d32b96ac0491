"""A recorded run, read back from its thread: which steps it asked, who answered, and how.

The thread is read from the room file when it is here (no hub needed, so an
offline replay needs nothing running), else through the hub. Only verified
lines from trusted nicks count, exactly as the foreman counts them
(agents/foreman/pipeline.py's Run).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents.foreman.pipeline import KEY, Run
from room.client import read_file
from room.errors import UsageError
from room.log import Filter
from room.message import Message, bare

if TYPE_CHECKING:
    from agents.home import Home

FOREMAN = "foreman"


@dataclass(frozen=True)
class Step:
    """One step of a run: the foreman's ask and the step's answer to it."""

    key: str
    nick: str
    seat: str | None
    ask: Message
    answer: Message

    def row(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "nick": self.nick,
            "seat": self.seat,
            "ask_seq": self.ask.seq,
            "answer_seq": self.answer.seq,
        }


def seat_of(answer: Message) -> str | None:
    """The seat an answer names (`data.seat`), or None for a step that asks no model."""
    seat = (answer.data or {}).get("seat")
    return seat if isinstance(seat, str) else None


async def read_thread(home: Home, thread: str) -> list[Message]:
    """Every line of `thread`, in order: from the room file when it is here, else the hub."""
    if home.society.room.engine == "jsonl" and home.room_path.exists():
        lines, _ = read_file(home.room_path, 0, None, Filter(thread=thread))
        return [Message.model_validate(line) for line in lines]
    found: list[Message] = []
    after = 0
    async with home.client(home.society.operator) as client:
        while True:
            lines, last = await client.read(after, 1000, thread=thread)
            found += [Message.model_validate(line) for line in lines]
            if len(lines) < 1000 or last <= after:
                return found
            after = last


class Recorded:
    """A run rebuilt from its thread, with its answered steps in the order they were asked."""

    def __init__(self, home: Home, thread: str, messages: list[Message]) -> None:
        self.home = home
        self.thread = thread
        self.messages = messages
        try:
            self.run = Run(messages, foreman=FOREMAN, trusted=home.trust.trusted, now=time.time())
        except ValueError:
            raise UsageError(
                f"there is no run with the thread {thread!r} in the room: no verified ask to "
                f"@{FOREMAN} carries it. Use the thread its command printed (exp-…, bp-…, "
                f"build-…); `bullpen runs` lists them"
            ) from None
        asks = sorted(
            (m for m in self.run.messages if m.from_ == FOREMAN and m.type == "ask"),
            key=lambda m: m.seq,
        )
        self.steps: list[Step] = []
        for ask in asks:
            key = str((ask.data or {}).get(KEY, ""))
            answer = self.run.reply(key)
            if not key or self.run.ask(key) is not ask or answer is None:
                continue
            self.steps.append(Step(key, bare(ask.to), seat_of(answer), ask, answer))

    @classmethod
    async def load(cls, home: Home, thread: str) -> Recorded:
        return cls(home, thread, await read_thread(home, thread))

    def step(self, key: str) -> Step:
        for step in self.steps:
            if step.key == key:
                return step
        known = ", ".join(s.key for s in self.steps) or "none"
        raise UsageError(
            f"the run {self.thread} has no answered step with the key {key!r}; its steps are: "
            f"{known} (`bullpen replay {self.thread} --list`)"
        )

    def through(self, seq: int) -> list[Message]:
        """The thread as it stood when seq `seq` was posted: what a step's reads saw."""
        return [m for m in self.messages if m.seq <= seq]

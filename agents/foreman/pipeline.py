"""A pipeline run, as the foreman sees it: nothing but its thread in the room.

The foreman keeps no state. On every wake it reads the run's thread, builds
a Run from it, and asks the pipeline what should happen next. A pipeline is
a pure function of the Run: it returns Asks (work for step nicks) and
Reports (news for the operator), each with a key unique in the run. The
runtime posts only keys not already in the thread, so a restart, a repeated
wake or a late reply never sends anything twice.

Only verified messages from trusted nicks count; a reply counts only when it
comes from the nick that was asked and answers that ask's id. Anyone else's
words in the thread are ignored, exactly as a lurker would ignore them.

A fork (`bullpen replay THREAD --step KEY --fork`, docs/replay.md) is a run
whose starting ask carries `forked_from` and `seeded`: the parent's answers
up to the forked step and the replayed answer in its place. The Run counts
each seeded answer as asked and answered, so the pipeline carries on from
there; the seeds are in the thread, in the operator's own verified ask.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from room.message import Message, bare

KEY = "key"
FORKED_FROM = "forked_from"  # "THREAD@SEQ": the run and the step's ask this run forks from
SEEDED = "seeded"  # [{"key", "nick", "body", "data"}]: answers a fork starts with


@dataclass(frozen=True)
class Ask:
    """Work for a step nick; `data` are the step's inputs."""

    key: str
    to: str
    body: str
    data: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None  # overdue after this; None: the nick's own timeout


@dataclass(frozen=True)
class Report:
    """News for the operator who started the run."""

    key: str
    body: str
    data: dict[str, Any] = field(default_factory=dict)
    final: bool = False  # the run is over
    in_reply_to: str | None = None  # default: the run's starting ask


Action = Ask | Report


class Run:
    """One run, rebuilt from its thread."""

    def __init__(
        self,
        messages: Iterable[Message],
        *,
        foreman: str,
        trusted: frozenset[str],
        now: float,
    ) -> None:
        self.foreman = foreman
        self.now = now
        self.messages = [m for m in messages if m.verified and m.from_ in trusted]
        starts = [
            m
            for m in self.messages
            if m.type == "ask" and bare(m.to) == foreman and m.from_ != foreman
        ]
        if not starts:
            raise ValueError("this thread has no verified ask to the foreman")
        self.start = starts[0]
        self.thread = self.start.thread or ""
        self.operator = self.start.from_
        self._asks: dict[str, Message] = {}
        self._reports: dict[str, Message] = {}
        for message in self.messages:
            if message.from_ != foreman or not message.data or KEY not in message.data:
                continue
            key = str(message.data[KEY])
            target = self._asks if message.type == "ask" else self._reports
            target.setdefault(key, message)
        by_id = {m.id: m for m in self._asks.values()}
        self._replies: dict[str, Message] = {}
        for message in self.messages:
            asked = by_id.get(message.in_reply_to or "")
            if (
                asked is not None
                and message.type == "reply"
                and message.from_ == bare(asked.to)
                and asked.data is not None
            ):
                self._replies.setdefault(str(asked.data[KEY]), message)
        self._seed()

    def _seed(self) -> None:
        """A fork's seeded answers, as an ask and its reply each (keys already in the thread
        win); a seed that is not a {key, nick, body, data} object is ignored."""
        data = self.start.data or {}
        seeds = data.get(SEEDED)
        if not data.get(FORKED_FROM) or not isinstance(seeds, list):
            return
        for n, seed in enumerate(seeds):
            if not isinstance(seed, dict):
                continue
            key, nick, body = seed.get(KEY), seed.get("nick"), seed.get("body")
            answer = seed.get("data")
            if not (isinstance(key, str) and isinstance(nick, str) and isinstance(body, str)):
                continue
            if key in self._asks or not isinstance(answer, dict | None):
                continue
            common = {"seq": self.start.seq, "ts": self.start.ts, "thread": self.thread}
            ask = Message.model_validate(
                {
                    **common,
                    "id": f"{self.start.id}/seed/{n}",
                    "from": self.foreman,
                    "to": f"@{nick}",
                    "type": "ask",
                    "body": f"(seeded by the fork of {data[FORKED_FROM]})",
                    "data": {KEY: key},
                    "verified": True,
                }
            )
            self._asks[key] = ask
            self._replies[key] = Message.model_validate(
                {
                    **common,
                    "id": f"{ask.id}/answer",
                    "from": nick,
                    "to": f"@{self.foreman}",
                    "type": "reply",
                    "body": body,
                    "data": answer,
                    "in_reply_to": ask.id,
                    "verified": True,
                }
            )

    @property
    def request(self) -> dict[str, Any]:
        """The starting ask's data: the run's parameters."""
        return dict(self.start.data or {})

    @property
    def keys(self) -> set[str]:
        """Every key the foreman already posted in this run."""
        return set(self._asks) | set(self._reports)

    def ask(self, key: str) -> Message | None:
        return self._asks.get(key)

    def reply(self, key: str) -> Message | None:
        return self._replies.get(key)

    def steps(self) -> list[tuple[str, Message, Message | None]]:
        """(key, ask, its reply or None) for every ask the foreman sent, a fork's seeds
        included, in the order sent: what `bullpen runs show` and the web view list."""
        asked = sorted(self._asks.items(), key=lambda item: item[1].seq)
        return [(key, ask, self._replies.get(key)) for key, ask in asked]

    def report(self, key: str) -> Message | None:
        return self._reports.get(key)

    def failed(self, key: str) -> bool:
        reply = self._replies.get(key)
        return bool(reply and reply.data and reply.data.get("failed"))

    def pending(self) -> list[Message]:
        """Asks the foreman sent that have no reply yet."""
        return [m for k, m in self._asks.items() if k not in self._replies]

    def answers_to(self, key: str) -> list[Message]:
        """The operator's replies to one of the foreman's reports (the second turn)."""
        report = self._reports.get(key)
        if report is None:
            return []
        return [
            m
            for m in self.messages
            if m.in_reply_to == report.id
            and m.from_ == self.operator
            and bare(m.to) == self.foreman
        ]

    @property
    def finished(self) -> bool:
        return self.final_report() is not None

    def final_report(self) -> Message | None:
        """The report that ended the run, or None while it runs."""
        return next((m for m in self._reports.values() if m.data and m.data.get("final")), None)

    def operator_replies(self) -> list[Message]:
        """Every reply the run's operator sent the foreman in this thread."""
        return [
            m
            for m in self.messages
            if m.type == "reply" and m.from_ == self.operator and bare(m.to) == self.foreman
        ]

    @property
    def cancellation(self) -> Message | None:
        """The operator's cancel of this run (agents/runtime/cancel.py), if any: only the
        run's own operator, to the foreman, counts."""
        for message in self.messages:
            if (
                message.from_ == self.operator
                and bare(message.to) == self.foreman
                and message.type == "chat"
                and (message.data or {}).get("cancel")
            ):
                return message
        return None


class Pipeline(Protocol):
    """A deterministic sequencer: what to do next, given everything so far."""

    name: str

    def advance(self, run: Run) -> list[Action]:
        """Asks and reports due now; already-posted keys are skipped by the runtime."""
        ...

    def in_flight_limit(self, run: Run) -> int:
        """How many asks may await replies at once."""
        ...


# A pipeline may also have `check(home)`: the foreman calls it when it starts, so the
# pipeline refuses a bad society.toml section of its own before any run (optional).

"""An in-memory room for expedition tests: the real pipeline, the real steps, no processes.

`Sim` keeps a list of Messages the way the hub would store them, plays the
foreman (Run -> advance -> post the keys not yet posted) and plays each
step nick (call the handler, post its reply, or a FAILED reply if it raised
StepFailed). Model judgments go to a judge the test chooses: by default the
built-in local seat's answers, validated with the step's schema.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.expedition import late_steps, steps
from agents.expedition.local import LOCAL_ANSWERS
from agents.expedition.pipeline import Expedition
from agents.foreman.pipeline import KEY, Ask, Report, Run
from agents.home import Home
from agents.runtime.step import AnswerT, Judgment, JudgmentRequest, Reply, StepContext
from room.client import RoomClient
from room.errors import StepFailed
from room.message import Message

OPERATOR = "avery"
FOREMAN = "foreman"
THREAD = "exp-test"
HANDLERS: dict[str, Callable[[Message, StepContext], Reply | Awaitable[Reply]]] = {
    "context": steps.build_context,
    "termgen": steps.gen_terms,
    "retriever": steps.retrieve_candidates,
    "scorer": steps.score_batch,
    "scotoma": steps.pick_scotoma,
    "excerpter": late_steps.extract_excerpts,
    "briefer": late_steps.assemble_brief,
}
TRUSTED = frozenset({OPERATOR, FOREMAN, *HANDLERS})


def message(seq: int, sender: str, to: str, type_: str, body: str, **fields: Any) -> Message:
    """A stored, verified line as the hub would write it."""
    return Message.model_validate(
        {
            "seq": seq,
            "id": f"m{seq:04d}",
            "ts": "2025-01-01T00:00:00.000Z",
            "from": sender,
            "to": to if to.startswith("@") else f"@{to}",
            "type": type_,
            "body": body,
            "data": fields.get("data"),
            "in_reply_to": fields.get("in_reply_to"),
            "thread": fields.get("thread", THREAD),
            "verified": fields.get("verified", True),
            "prev": "",
        }
    )


def write_home(
    root: Path,
    kb: Path,
    *,
    operator_names: tuple[str, ...] = ("Avery",),
    roots: dict[str, list[Path]] | None = None,
) -> Home:
    """A home whose [expedition] section points at `kb` and writes briefs under the home.

    `roots`: a [roots] table, purpose -> folders (docs/operating.md)."""
    root.mkdir(parents=True, exist_ok=True)
    names = ", ".join(f'"{n}"' for n in operator_names)
    table = "".join(
        f"{purpose} = [{', '.join(json.dumps(str(p)) for p in paths)}]\n"
        for purpose, paths in (roots or {}).items()
    )
    (root / "society.toml").write_text(
        f'operator = "{OPERATOR}"\n\n[expedition]\nkb = "{kb}"\nbriefs = "briefs"\n'
        f"operator_names = [{names}]\n" + (f"\n[roots]\n{table}" if table else ""),
        encoding="utf-8",
    )
    return Home(root)


async def local_judge(
    role: str, request: JudgmentRequest, schema: type[AnswerT]
) -> Judgment[AnswerT]:
    """The built-in local seat's answer, validated like any seat's."""
    answer = schema.model_validate(LOCAL_ANSWERS[request.step](dict(request.payload)))
    return Judgment(answer=answer, seat="local", kind="local", role=role)


@dataclass
class Sim:
    home: Home
    judge: Callable[..., Awaitable[Judgment[Any]]] = local_judge
    messages: list[Message] = field(default_factory=list)
    requests: list[JudgmentRequest] = field(default_factory=list)
    pipeline: Expedition = field(default_factory=Expedition)

    def post(self, sender: str, to: str, type_: str, body: str, **fields: Any) -> Message:
        posted = message(len(self.messages) + 1, sender, to, type_, body, **fields)
        self.messages.append(posted)
        return posted

    def run(self) -> Run:
        return Run(self.messages, foreman=FOREMAN, trusted=TRUSTED, now=0.0)

    def start(self, **request: Any) -> Message:
        data = {"pipeline": "expedition", "voice": "Carbon", **request}
        return self.post(OPERATOR, FOREMAN, "ask", f"expedition: {request.get('title')}", data=data)

    async def _judge(self, role: str, request: JudgmentRequest, schema: type[Any]) -> Any:
        self.requests.append(request)
        return await self.judge(role, request, schema)

    def foreman(self) -> list[Message]:
        """One foreman wake: post what advance() says is due and not yet posted."""
        run = self.run()
        if run.finished:
            return []
        posted = []
        seen = run.keys
        for action in self.pipeline.advance(run):
            if action.key in seen:
                continue
            seen.add(action.key)
            if isinstance(action, Ask):
                posted.append(
                    self.post(
                        FOREMAN,
                        action.to,
                        "ask",
                        action.body,
                        data={**action.data, KEY: action.key},
                    )
                )
            elif isinstance(action, Report):
                data = {**action.data, KEY: action.key, "final": action.final}
                target = action.in_reply_to or run.start.id
                posted.append(
                    self.post(
                        FOREMAN, OPERATOR, "reply", action.body, data=data, in_reply_to=target
                    )
                )
        return posted

    def answer(self, ask: Message) -> Message:
        """Play the nick the ask is addressed to."""
        nick = ask.to.removeprefix("@")
        ctx = StepContext(
            nick=nick, home=self.home, options={}, judge=self._judge, read_thread=self._thread
        )
        try:
            result = HANDLERS[nick](ask, ctx)
            reply = asyncio.run(result) if inspect.isawaitable(result) else result
        except StepFailed as exc:
            return self.post(
                nick,
                FOREMAN,
                "reply",
                f"[{nick.upper()} FAILED — {exc.message}]",
                data={"failed": True, "reason": exc.message, "nick": nick},
                in_reply_to=ask.id,
            )
        return self.post(nick, FOREMAN, "reply", reply.body, data=reply.data, in_reply_to=ask.id)

    async def _thread(self, thread: str) -> list[Message]:
        return [m for m in self.messages if m.thread == thread]

    def settle(self, limit: int = 200) -> list[Message]:
        """Wake the foreman and the step nicks until nothing more happens; the reports posted."""
        reports: list[Message] = []
        for _ in range(limit):
            posted = self.foreman()
            reports += [m for m in posted if m.type == "reply"]
            pending = self.run().pending()
            if not pending:
                return reports
            for ask in pending:
                self.answer(ask)
        raise AssertionError("the run did not settle")

    def reply_to_report(
        self, report: Message, body: str, data: dict[str, Any] | None = None
    ) -> Message:
        return self.post(OPERATOR, FOREMAN, "reply", body, data=data, in_reply_to=report.id)

    def asks_to(self, nick: str) -> list[Message]:
        return [m for m in self.messages if m.type == "ask" and m.to == f"@{nick}"]


@dataclass
class ScriptedJudge:
    """Answers each judgment with the next scripted dict for its step, and keeps the requests."""

    answers: dict[str, list[dict[str, Any]]]
    requests: list[JudgmentRequest] = field(default_factory=list)

    async def __call__(
        self, role: str, request: JudgmentRequest, schema: type[AnswerT]
    ) -> Judgment[AnswerT]:
        self.requests.append(request)
        answer = schema.model_validate(self.answers[request.step].pop(0))
        return Judgment(answer=answer, seat="scripted", kind="cmd", role=role)


def step_context(home: Home, judge: Any = local_judge, nick: str = "step") -> StepContext:
    async def no_thread(thread: str) -> list[Message]:
        return []

    return StepContext(nick=nick, home=home, options={}, judge=judge, read_thread=no_thread)


def ask(data: dict[str, Any], *, to: str = "step", thread: str = THREAD) -> Message:
    """An ask from the foreman carrying `data`, as a step receives it."""
    return message(1, FOREMAN, to, "ask", "step", data=data, thread=thread)


class FakeClient:
    """The room as a list; `on_say` lets a test answer a post with the foreman's next report."""

    def __init__(self, lines: list[Message], on_say: dict[str, Message] | None = None) -> None:
        self.lines = list(lines)
        self.on_say = on_say or {}
        self.said: list[dict[str, Any]] = []
        self.pinged: list[str] = []  # who was pinged before a run was posted

    async def __aenter__(self) -> FakeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    follow = RoomClient.follow  # the real long-poll loop, over this fake's read

    async def read(
        self, after: int, limit: int = 100, *, thread: str | None = None, wait: float = 0
    ) -> tuple[list[dict[str, Any]], int]:
        found = [m.to_dict() for m in self.lines if m.seq > after and m.thread == thread][:limit]
        if not found and wait:
            await asyncio.sleep(0.01)  # a long poll that times out empty, shortened
        return found, max([after, *(m["seq"] for m in found)])

    async def say(self, to: str, body: str, **fields: Any) -> dict[str, Any]:
        seq = len(self.lines) + 1
        posted = message(
            seq,
            "avery",
            to,
            fields.get("type", "chat"),
            body,
            data=fields.get("data"),
            in_reply_to=fields.get("in_reply_to"),
            thread=fields.get("thread"),
        )
        self.lines.append(posted)
        if (fields.get("data") or {}).get("ping"):  # a listening lurker answers it at once
            self.pinged.append(to)
            pong = message(
                seq + 1, to.lstrip("@"), "@avery", "reply", "pong",
                in_reply_to=posted.id, thread=fields.get("thread"),
            )  # fmt: skip
            self.lines.append(pong)
            return posted.to_dict()
        self.said.append({"to": to, "body": body, **fields})
        reaction = self.on_say.get(body)
        if reaction is not None:
            self.lines.append(reaction.model_copy(update={"seq": seq + 1, "id": f"m{seq + 1:04d}"}))
        return posted.to_dict()

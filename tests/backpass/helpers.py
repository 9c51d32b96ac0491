"""Helpers for the backpass tests: real git repositories in tmp dirs, a fake judge, a tiny foreman.

The foreman here is a test double of the runtime's contract (agents/foreman/pipeline.py):
it rebuilds a Run from the thread on every turn, posts the keys not yet posted
while at most `in_flight_limit` asks await replies, and hands each ask to its
step function, posting a FAILED reply when the step raises StepFailed.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agents.backpass import steps
from agents.backpass.config import BackpassConfig, RunParams
from agents.backpass.local import LOCAL_ANSWERS
from agents.backpass.pipeline import Backpass
from agents.foreman.pipeline import Ask, Report, Run
from agents.home import Home
from agents.runtime.step import Judge, Judgment, JudgmentRequest, StepContext
from room.errors import SeatError, StepFailed
from room.message import Message

REPO_ROOT = Path(__file__).resolve().parents[2]
PROMPTS = REPO_ROOT / "config" / "prompts"
DEMO = REPO_ROOT / "config" / "demo"
DAY = "2026-10-20"
START_TS = f"{DAY}T03:00:00.000Z"
START_EPOCH = 1792465200.0  # 2026-10-20T03:00:00Z

STEP_OF_NICK = {
    "tracelister": steps.list_traces,
    "analyst": steps.analyse,
    "quotechecker": steps.check_quotes,
    "ledgerkeeper": steps.keep_ledger,
    "synthesizer": steps.synthesize,
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def make_repo(path: Path, files: dict[str, str], branch: str = "main") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "--quiet", f"--initial-branch={branch}")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(text.encode())
    git(path, "add", "--all")
    git(path, "commit", "--quiet", "-m", "start")
    return path


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under `root` (a repository's .git included) mapped to its SHA-256."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


PUBLIC_MD = "# Public\n\n- Run the linter before the tests; it is faster.\n- Keep commits small.\n"
PRIVATE_MD = "# Private\n\n- The staging database is rebuilt every Monday.\n"


@dataclass
class BackpassHome:
    """A home with two memory repositories, a traces folder and the default prompts."""

    root: Path

    def __post_init__(self) -> None:
        # A lurker always has its home's society.toml: the steps read [roots] and [backpass].
        society = self.root / "society.toml"
        if not society.exists():
            society.write_text("")

    @property
    def home(self) -> Home:
        return Home(self.root)

    @property
    def public(self) -> Path:
        return self.root / "memory" / "public"

    @property
    def private(self) -> Path:
        return self.root / "memory" / "private"

    @property
    def traces(self) -> Path:
        return self.root / "traces"

    @property
    def state(self) -> Path:
        return self.root / "state" / "backpass.sha256"

    def trace(self, name: str, text: str) -> Path:
        path = self.traces / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
        return path

    def params(self, **overrides: Any) -> RunParams:
        report_only = overrides.pop("report_only", False)
        return BackpassConfig().run_params(self.home, report_only=report_only, **overrides)


def new_home(tmp_path: Path) -> BackpassHome:
    root = tmp_path / "home"
    make_repo(root / "memory" / "public", {"memory.md": PUBLIC_MD})
    make_repo(root / "memory" / "private", {"memory.md": PRIVATE_MD, "ledger.md": ""})
    (root / "traces").mkdir(parents=True)
    (root / "state").mkdir()  # as `bullpen init` leaves it: the state file's folder exists
    shutil.copytree(PROMPTS, root / "prompts")
    return BackpassHome(root)


Script = Callable[[str, JudgmentRequest], "dict[str, Any] | Exception"]


def local_script(step: str, request: JudgmentRequest) -> dict[str, Any] | Exception:
    return LOCAL_ANSWERS[step](dict(request.payload))


@dataclass
class FakeJudge:
    """Answers from a script (default: the local seat's answers) and remembers every request."""

    script: Script = local_script
    seat: str = "fake"
    fallback_for: set[str] = field(default_factory=set)  # sessions answered "by the fallback"
    history: list[tuple[str, JudgmentRequest]] = field(default_factory=list)

    async def __call__(
        self,
        role: str,
        request: JudgmentRequest,
        schema: type[BaseModel],
        *,
        seat: str | None = None,
    ) -> Judgment[Any]:
        self.history.append((role, request))
        answer = self.script(request.step, request)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, Exception):
            raise answer
        session = str(request.payload.get("session", ""))
        fallback = session in self.fallback_for
        return Judgment(
            answer=schema.model_validate(answer),
            seat=f"{self.seat}-fallback" if fallback else self.seat,
            kind="cmd",
            role=role,
            fallback_used=fallback,
            attempts=2 if fallback else 1,
        )


def seat_error(reason: str) -> SeatError:
    return SeatError(f"seat 'fake' (cmd): {reason}", seat="fake", kind="cmd", reason=reason)


class Thread:
    """A room thread, as the hub would store it (every line verified)."""

    def __init__(self, thread: str = "backpass-test-1") -> None:
        self.thread = thread
        self.messages: list[Message] = []

    def post(
        self,
        sender: str,
        to: str,
        kind: str,
        body: str,
        data: dict[str, Any] | None = None,
        in_reply_to: str | None = None,
        ts: str = START_TS,
    ) -> Message:
        seq = len(self.messages) + 1
        message = Message.model_validate(
            {
                "seq": seq,
                "id": f"m{seq:05d}",
                "ts": ts,
                "from": sender,
                "to": to,
                "type": kind,
                "body": body,
                "data": data,
                "in_reply_to": in_reply_to,
                "thread": self.thread,
                "verified": True,
                "prev": "",
            }
        )
        self.messages.append(message)
        return message

    def run(self, now: float = START_EPOCH) -> Run:
        trusted = frozenset({"operator", "foreman", *STEP_OF_NICK})
        return Run(self.messages, foreman="foreman", trusted=trusted, now=now)


@dataclass
class Outcome:
    final: Message
    thread: Thread
    judge: Judge

    @property
    def data(self) -> dict[str, Any]:
        return dict(self.final.data or {})

    @property
    def funnel(self) -> dict[str, Any]:
        return dict(self.data["funnel"])


async def _answer(ask: Message, ctx: StepContext) -> tuple[str, dict[str, Any]]:
    nick = ask.to.removeprefix("@")
    try:
        result = STEP_OF_NICK[nick](ask, ctx)
        if inspect.isawaitable(result):
            result = await result
    except StepFailed as exc:
        return f"[{nick.upper()} FAILED — {exc.message}]", {"failed": True, "message": exc.message}
    return result.body, dict(result.data or {})


_runs = itertools.count(1)


def drive(home: Home, params: RunParams, judge: Judge | None = None) -> Outcome:
    """Run one backpass to its final report through the real pipeline and steps."""
    return asyncio.run(drive_async(home, params, judge))


async def drive_async(
    home: Home, params: RunParams, judge: Judge | None = None, thread_name: str | None = None
) -> Outcome:
    """drive(), inside a running event loop."""
    judge = judge or FakeJudge()
    thread = Thread(thread_name or f"backpass-test-{next(_runs)}")
    pipeline = Backpass()
    thread.post(
        "operator", "@foreman", "ask", "backpass", {"pipeline": "backpass", **params.model_dump()}
    )

    async def read_thread(_: str, __: int = 0) -> list[Message]:
        return list(thread.messages)

    async def main() -> Message:
        for _ in range(10_000):
            run = thread.run()
            limit = pipeline.in_flight_limit(run)
            for action in pipeline.advance(run):
                if action.key in run.keys:
                    continue
                if isinstance(action, Report):
                    data = {**action.data, "key": action.key, "final": action.final}
                    posted = thread.post(
                        "foreman", "@operator", "reply", action.body, data, in_reply_to=run.start.id
                    )
                    if action.final:
                        return posted
                    continue
                assert isinstance(action, Ask)
                if len(thread.run().pending()) >= limit:
                    continue
                thread.post(
                    "foreman",
                    f"@{action.to}",
                    "ask",
                    action.body,
                    {**action.data, "key": action.key},
                )
            waiting = thread.run().pending()
            if not waiting:
                raise AssertionError("the pipeline neither asked nor reported anything")
            ask = waiting[0]
            ctx = StepContext(ask.to.removeprefix("@"), home, {}, judge, read_thread)
            body, data = await _answer(ask, ctx)
            thread.post(
                ask.to.removeprefix("@"), "@foreman", "reply", body, data, in_reply_to=ask.id
            )
        raise AssertionError("the run did not finish")

    final = await main()
    return Outcome(final, thread, judge)

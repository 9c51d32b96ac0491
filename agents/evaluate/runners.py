"""One case run in an eval society, and what it came to: passed, gates failed, calls, time.

Every case is run through the real commands (`bullpen expedition`, `bullpen
build`) against the eval home, then judged from its thread: each answered
step's gates (agents/replay/gates.py, the pipelines' own checks), the run's
outcome, and what the case expects a good run to find.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.evaluate.cases import REPO_MARK, BackpassCase, BuildCase, ExpeditionCase, Loaded
from agents.evaluate.society import EvalSociety
from agents.intake.bounded import read_text
from agents.replay import gates
from agents.replay.recorded import Recorded
from agents.seats.tally import judgments_of
from room.client import read_file
from room.log import Filter
from room.message import Message

CASE_TIMEOUT_S = 900.0
SETTLE_S = 300.0  # a step's own time budget ends any call still running well before this
_THREAD = re.compile(r"\b(exp-[0-9a-f]+|(?:build|backpass)-\d{4}-\d{2}-\d{2}-[0-9a-f]+)\b")


@dataclass
class CaseResult:
    """What one case came to under one seat assignment."""

    case: str
    kind: str
    passed: bool = False
    failed_gates: list[str] = field(default_factory=list)
    model_calls: int = 0  # server_calls, plus the local and cmd seats' attempts
    server_calls: int = 0  # requests sent to a model server (the seats' `seat.http` lines)
    server_unanswered: int = 0  # of those calls, the ones cut off (timeout, cancelled, error)
    tokens_in: int = 0  # the server's own `usage` of those requests
    tokens_out: int = 0
    tokens: int = 0
    rescued: int = 0  # steps a retry (or a fallback seat) saved
    lessons: int = 0  # lessons handed to its steps on wake (each answer names them)
    wall_s: float = 0.0
    thread: str | None = None
    note: str = ""
    step: str | None = None  # a step case: the step it asks (stepcases.py)
    skipped: str | None = None  # why the seat could not be asked (neither passed nor failed)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def log_marks(root: Path) -> dict[Path, int]:
    """How far each lurker log of the eval home reaches now: a case's calls are the lines after."""
    return {log: log.stat().st_size for log in sorted((root / "logs").glob("*.log"))}


def server_calls(root: Path, marks: dict[Path, int]) -> list[dict[str, Any]]:
    """Every call a seat made to a model server since `marks`: openai seats log one
    `seat.http` line per call however it ended, with the requests it sent and, when the
    server answered, its token usage (a call cut off has none: its tokens are not known)."""
    found: list[dict[str, Any]] = []
    for log in sorted((root / "logs").glob("*.log")):
        with open(log, "rb") as handle:
            handle.seek(marks.get(log, 0))
            for raw in handle.read().splitlines():
                if b'"seat.http"' not in raw:
                    continue
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(line, dict) and line.get("event") == "seat.http":
                    found.append(line)
    return found


def count_server_calls(root: Path, marks: dict[Path, int], result: CaseResult) -> None:
    calls = server_calls(root, marks)
    result.server_calls = sum(int(c.get("requests", 1)) for c in calls)
    result.server_unanswered = sum(1 for c in calls if not isinstance(c.get("status"), int))
    result.model_calls += result.server_calls
    result.tokens_in = sum(int(c.get("tokens_in") or 0) for c in calls)
    result.tokens_out = sum(int(c.get("tokens_out") or 0) for c in calls)
    result.tokens = result.tokens_in + result.tokens_out


def tally(society: EvalSociety, thread: str, result: CaseResult) -> Recorded:
    """Calls, tokens, rescues and failed gates of every answered step of the thread."""
    home = society.home
    lines, _ = read_file(home.room_path, 0, None, Filter(thread=thread))
    recorded = Recorded(home, thread, [Message.model_validate(line) for line in lines])
    for step in recorded.steps:
        data = dict(step.answer.data or {})
        judged = judgments_of(data)
        calls = sum(int(j.get("attempts") or 1) for j in judged)
        # a server's requests are counted from the seats' logs (count_server_calls)
        result.model_calls += sum(
            int(j.get("attempts") or 1) for j in judged if j.get("seat_kind") != "openai"
        )
        result.lessons += (
            len(data.get("lessons") or []) if isinstance(data.get("lessons"), list) else 0
        )
        if not data.get("failed") and calls > len(judged):
            result.rescued += 1
        config = home.society.nicks.get(step.nick)
        checked = gates.check(config.handler if config else None, step.ask, data)
        result.failed_gates += [f"{step.nick}.{name}" for name in checked["failed"]]
    return recorded


def _files(items: Any) -> set[str]:
    return {str(i.get("file")) for i in items or [] if isinstance(i, dict)}


def run_expedition(society: EvalSociety, loaded: Loaded, result: CaseResult) -> None:
    case = loaded.case
    assert isinstance(case, ExpeditionCase)
    kb = society.root / "kb" / loaded.name  # inside the eval home's kb root
    loaded.copy_folder("kb", kb)
    done = society.run(
        "expedition",
        "--title",
        case.title,
        "--keyword",
        case.keyword,
        "--kb",
        str(kb),
        timeout=CASE_TIMEOUT_S,
    )
    match = _THREAD.search(done.stderr + done.stdout)
    if match is None:
        result.failed_gates.append("run.started")
        result.note = (done.stderr or done.stdout).strip()[-300:]
        return
    result.thread = match.group(1)
    recorded = tally(society, result.thread, result)
    report = next(
        (m for m in recorded.run.messages if (m.data or {}).get("outcome") == "dig-report"), None
    )
    if report is None:
        result.failed_gates.append("run.dig_report")
        final = next((m for m in recorded.run.messages if (m.data or {}).get("final")), None)
        result.note = final.body[:300] if final else f"exit {done.returncode}"
        return
    data = report.data or {}
    for name, wanted, found in (
        ("deep_cuts", case.expect.deep_cuts, _files(data.get("deep_cuts"))),
        ("voice_anchors", case.expect.voice_anchors, _files(data.get("voice_anchors"))),
        ("direct_hits", case.expect.direct_hits, _files(data.get("direct_hits"))),
    ):
        if not set(wanted) <= found:
            result.failed_gates.append(f"expect.{name}")
    result.passed = not result.failed_gates


def run_build(society: EvalSociety, loaded: Loaded, result: CaseResult) -> None:
    """The build to green, then the hidden tests (never shown to a seat) on its artifact."""
    case = loaded.case
    assert isinstance(case, BuildCase)
    done = society.run("build", str(_ticket(society, loaded, case)), timeout=CASE_TIMEOUT_S)
    match = _THREAD.search(done.stderr + done.stdout)
    if match is not None:
        result.thread = match.group(1)
        tally(society, result.thread, result)
    artifact = _artifact(done.stdout + done.stderr)
    if done.returncode != 0 or artifact is None:
        result.failed_gates.append("run.green")
        result.note = (done.stderr or done.stdout).strip()[-300:]
        return
    # Copied out of the suite only now that the grind has ended, beside the artifact rather
    # than into it (the clone is model-written: a link planted there would be written
    # through). During the grind every fence hid the suite's folder of them ([build] hidden).
    with tempfile.TemporaryDirectory(prefix="bullpen-eval-hidden-") as folder:
        tests = loaded.copy_folder("hidden_tests", Path(folder) / "tests", skip=("__pycache__",))
        ran = hidden_tests(artifact, tests, society.root)
    if ran.returncode != 0:
        result.failed_gates.append("hidden_tests")
        result.note = ran.output.strip()[-300:]
    result.passed = not result.failed_gates


def _ticket(society: EvalSociety, loaded: Loaded, case: BuildCase) -> Path:
    """The case's ticket with @REPO@ as its own build dir (its starting files copied in)."""
    from agents.build.config import BuildConfig
    from agents.build.ticket import MAX_TICKET_BYTES

    repo = Path(BuildConfig.of(society.home).root) / loaded.name
    if case.repo:  # every file, __init__.py too: the build dir is the case's to shape
        loaded.copy_folder("repo", repo, skip=("__pycache__",))
    else:
        repo.mkdir(parents=True)
    text = read_text(loaded.path(case.ticket, "ticket"), MAX_TICKET_BYTES, "the case's ticket")
    ticket = society.root.parent / f"ticket-{loaded.name}.md"
    ticket.write_text(text.replace(REPO_MARK, str(repo)), encoding="utf-8")
    return ticket


def hidden_tests(
    artifact: Path,
    tests: Path,
    eval_home: Path,
    limit_s: float = CASE_TIMEOUT_S,
) -> Any:
    """pytest on the hidden tests behind the build's own fence (agents/build/fence.py): the
    artifact is model-written code, so it runs with a clean environment, resource limits,
    and (where bubblewrap works) read-only everywhere but the artifact, homes hidden, offline.
    Its environment is the build's python runner's (agents/build/routing.py): no installed
    pytest plugin loads itself unasked. `limit_s`: how long the run may take."""
    import asyncio

    from agents.build.fence import FenceLimits, choose, clean_env, run_fenced
    from agents.build.routing import by_name

    with tempfile.TemporaryDirectory(prefix="bullpen-eval-tests-") as scratch:
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)]
        return asyncio.run(
            run_fenced(
                argv,
                cwd=artifact,
                writable=[artifact, Path(scratch)],
                env=clean_env(Path(scratch), dict(by_name("python").env)),
                limits=FenceLimits(timeout_s=limit_s),
                fence=choose("auto"),
                hidden=[eval_home],
            )
        )


def _artifact(output: str) -> Path | None:
    """The green clone the build's report names (agents/build/report.py)."""
    match = re.search(r"clone \(the artifact\):\s*(\S+)", output)
    path = Path(match.group(1)) if match else None
    return path if path is not None and path.is_dir() else None


def run_backpass(society: EvalSociety, loaded: Loaded, result: CaseResult) -> None:
    """Traces and memory repos through the backpass; the lessons and quotes it keeps."""
    case = loaded.case
    assert isinstance(case, BackpassCase)
    traces = loaded.copy_folder("traces", society.root / "traces" / loaded.name)
    args = ["backpass", "--traces", str(traces)]
    for flag, value in (("public", case.public), ("private", case.private)):
        if value:
            repo = loaded.copy_folder(flag, society.root / "memory" / loaded.name / flag)
            _commit(repo)
            args += [f"--{flag}", str(repo)]
    done = society.run(*args, timeout=CASE_TIMEOUT_S)
    match = _THREAD.search(done.stderr + done.stdout)
    if match is not None:
        result.thread = match.group(1)
        tally(society, result.thread, result)
    if done.returncode != 0:
        result.failed_gates.append("run.finished")
        result.note = (done.stderr or done.stdout).strip()[-300:]
        return
    kept = _kept_text(society, result.thread, done.stdout)
    if not all(text in kept for text in case.expect.lessons):
        result.failed_gates.append("expect.lessons")
    if not all(text in kept for text in case.expect.quotes):
        result.failed_gates.append("expect.quotes")
    result.passed = not result.failed_gates


def _kept_text(society: EvalSociety, thread: str | None, stdout: str) -> str:
    """Where a backpass run's lessons and quotes are: its report, its thread, and the items
    file its quote check kept (inside the eval home)."""
    lines = read_file(society.home.room_path, 0, None, Filter(thread=thread))[0] if thread else []
    parts = [stdout, *(json.dumps(line, ensure_ascii=False) for line in lines)]
    root = society.root.resolve()
    for line in lines:
        items = (line.get("data") or {}).get("items_file")
        path = Path(str(items)).resolve() if isinstance(items, str) else None
        if path is not None and path.is_relative_to(root) and path.is_file():
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


def _commit(repo: Path) -> None:
    """A memory folder as the backpass wants it: a git repository with its files committed."""
    if (repo / ".git").exists():
        return
    from agents.backpass.gitwork import git

    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", "eval case memory", identity=True)


RUNNERS = {"expedition": run_expedition, "build": run_build, "backpass": run_backpass}
NICKS = {
    "expedition": ["foreman", "context", "termgen", "retriever", "scorer", "scotoma", "excerpter"],
    "build": ["foreman", "sandbox", "testdesigner", "py", "godev", "jsdev"],
    "backpass": [
        "foreman",
        "tracelister",
        "analyst",
        "quotechecker",
        "ledgerkeeper",
        "synthesizer",
    ],
}


def open_asks(society: EvalSociety, thread: str) -> set[str]:
    """The ids of the foreman's asks in the thread (each step's) that have no reply yet: a
    step agent always replies, with its answer or its `[STEP FAILED — reason]`."""
    lines, _ = read_file(society.home.room_path, 0, None, Filter(thread=thread))
    asked = {
        str(line["id"])
        for line in lines
        if line.get("type") == "ask" and line.get("from") == "foreman"
    }
    return asked - {str(line.get("in_reply_to")) for line in lines if line.get("type") == "reply"}


def settle(society: EvalSociety, thread: str | None, limit: float = SETTLE_S) -> None:
    """Wait until every ask of the case's run has its reply (bounded): a run that ends at a
    failed step may still have its siblings' model calls in flight (the other score batches),
    and a call the society is stopped in the middle of never writes its `seat.http` line, so
    the scoreboard would count fewer calls than the server answered."""
    if not thread:
        return
    deadline = time.monotonic() + limit
    while open_asks(society, thread) and time.monotonic() < deadline:
        time.sleep(0.2)


def run_case(society: EvalSociety, loaded: Loaded) -> CaseResult:
    result = CaseResult(loaded.name, loaded.case.kind)
    started = time.monotonic()
    marks = log_marks(society.root)
    try:
        RUNNERS[loaded.case.kind](society, loaded, result)
    except subprocess.TimeoutExpired:
        result.failed_gates.append("run.timeout")
        result.passed = False
    settle(society, result.thread)
    count_server_calls(society.root, marks, result)
    result.wall_s = round(time.monotonic() - started, 2)
    return result

"""`bullpen expedition` and `bullpen expedition confirm`: the operator's side of a run.

The command posts one ask to the foreman and then only reads the room: it
prints each step's progress to stderr while it waits, prints the Dig Report
when it comes, and stops there unless told to confirm (`--yes`) or asked at
a terminal. Confirming later is `confirm THREAD`, from any shell: the run
lives in the room, not in this process.

Progress is one plain line per event, each naming its step of the whole
run (`step 3/6 score: batch 1 of 2`): no escapes or redraws, and a step's
body is stripped of control characters, so a pipe, a log file or the
journal reads exactly what a terminal shows.

Before it posts, the foreman must answer a ping (agents/runtime/waiting.py); while it
waits, a line every 30 s says which step runs and for how long; Ctrl-C asks whether to
cancel the run or detach from it (exit 130).

Exit codes: 0 brief written, or Dig Report shown and the run left waiting;
1 a step failed; 2 the brief was not written (voice anchor MISSING), or the
command refused its arguments and posted nothing (argparse's code; the
arguments are checked in .cli, and here a thread that names no run or a
path outside its [roots] folder); 3 gave
up waiting (the run goes on); 4 the foreman could not act on the answer (it
dropped a row the report does not list, or said none of confirm, drop and
redirect): the run keeps waiting for a clear one; 5 the run was cancelled
(`bullpen cancel`, from here or elsewhere); 130 Ctrl-C (the run cancelled, or left going).
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agents.expedition.anchor import AnchorRefused, anchor_for_run
from agents.expedition.config import ExpeditionConfig
from agents.expedition.pipeline import DIG_REPORT
from agents.expedition.progress import Progress
from agents.expedition.prompting import RunEnded, typed_unless_ended
from agents.foreman.pipeline import KEY
from agents.roots import OutsideRoot
from agents.runticket import ticket_context
from agents.runtime.cancel import EXIT_CANCELLED
from agents.runtime.finaljson import final_json
from agents.runtime.waiting import Heartbeat, follow_run, require_listening
from room.client import read_thread
from room.message import Message, bare

if TYPE_CHECKING:
    from agents.gateway.runbudgets import RunBudget
    from agents.home import Home
    from room.client import RoomClient

FOREMAN = "foreman"
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_MISSING = 2
EXIT_TIMEOUT = 3
EXIT_UNCLEAR = 4
EXIT_USAGE = 2  # argparse's code for a refused argument; nothing was posted
POLL_S = 25.0


def new_thread() -> str:
    return f"exp-{secrets.token_hex(4)}"


def _absolute(value: str | None) -> str | None:
    """A path typed at the operator's shell means the shell's folder, not the home."""
    return str(Path(value).expanduser().resolve()) if value else None


def request_data(
    *,
    title: str,
    keyword: str,
    kb: str | None = None,
    voice: str = "Carbon",
    archetype: str | None = None,
    monomyth: str | None = None,
    blaze: str | None = None,
    briefs: str | None = None,
) -> dict[str, Any]:
    """The starting ask's data; omitted paths fall back to [expedition] in society.toml."""
    data: dict[str, Any] = {"pipeline": "expedition", "title": title, "keyword": keyword}
    data["voice"] = voice
    optional = {
        "archetype": archetype,
        "monomyth": monomyth,
        "kb": _absolute(kb),
        "blaze": _absolute(blaze),
        "briefs": _absolute(briefs),
    }
    data.update({k: v for k, v in optional.items() if v})
    return data


def answer_post(
    drop: Sequence[str] = (), redirect: str | None = None, anchor: str | None = None
) -> tuple[str, dict[str, Any]]:
    """The body and data of the operator's answer to a Dig Report (or to a MISSING brief)."""
    if redirect is not None:
        if not redirect.strip():
            raise ValueError("an empty redirect says nothing to look for; give words, or confirm")
        return f"redirect {redirect}", {"redirect": redirect}
    body = "confirm" + (", drop " + " ".join(drop) if drop else "")
    data: dict[str, Any] = {"confirm": True, "drop": list(drop)}
    if anchor:
        body += f", anchor {anchor}"
        data["anchor"] = anchor
    return body, data


def continue_hint(thread: str) -> str:
    return (
        f"The run {thread} waits for your answer. Continue with:\n"
        f"  bullpen expedition confirm {thread} [--drop row_N ...]\n"
        f"  bullpen expedition confirm {thread} --redirect 'what to look for instead'"
    )


def anchor_hint(thread: str) -> str:
    return (
        f"The run {thread} waits for a voice anchor. Point to a lived file of the knowledge "
        f"base with:\n  bullpen expedition confirm {thread} --anchor FILE"
    )


def timeout_hint(thread: str, timeout: float, answered: bool) -> str:
    """What to say when the wait ran out: the run goes on, and nothing waits for the operator."""
    waited_for = (
        "No Dig Report or final report arrived within {s} s of your answer"
        if answered
        else "No Dig Report arrived within {s} s"
    ).format(s=f"{timeout:g}")
    return (
        f"{waited_for}; the run {thread} goes on in the room.\n"
        f"Follow it with:\n  bullpen tail --thread {thread}\n"
        f"When its Dig Report is there, answer it with:\n"
        f"  bullpen expedition confirm {thread} [--drop row_N ...]"
    )


def outcome_code(message: Message) -> int:
    """The exit code a final report means."""
    outcome = (message.data or {}).get("outcome")
    if outcome == "cancelled":
        return EXIT_CANCELLED
    if outcome == "brief":
        return EXIT_OK
    if outcome == "missing":
        return EXIT_MISSING
    return EXIT_FAILED


def is_dig_report(message: Message) -> bool:
    return str((message.data or {}).get(KEY, "")).startswith(DIG_REPORT)


@dataclass
class Follower:
    """Reads one run's thread until it needs the operator or ends."""

    home: Home
    client: RoomClient
    thread: str
    out: TextIO
    err: TextIO
    yes: bool = False
    interactive: bool = False
    foreman: str = FOREMAN
    as_json: bool = False  # --json: stdout gets the final result as one JSON object

    async def follow(self, after: int, timeout: float, *, answered: bool = False) -> int:
        """Print the thread's progress until the run needs the operator or ends; the exit code.

        `answered`: the operator's answer is already posted, so what is awaited
        is the brief or the next Dig Report.
        """
        return await follow_run(
            lambda heartbeat: self._follow_until_ended(after, timeout, answered, heartbeat),
            self.client,
            self.thread,
            self.err,
            self.foreman,
        )

    async def _follow_until_ended(
        self, after: int, timeout: float, answered: bool, heartbeat: Heartbeat
    ) -> int:
        try:
            return await self._follow(after, timeout, answered, heartbeat)
        except RunEnded as ended:
            return self._ended(ended.report)

    async def _follow(
        self, after: int, timeout: float, answered: bool, heartbeat: Heartbeat
    ) -> int:
        operator = self.home.society.operator
        progress = Progress(self.foreman)
        try:
            async with asyncio.timeout(timeout) as turn:
                async for line in self.client.follow(after, thread=self.thread, wait=POLL_S):
                    message = Message.model_validate(line)
                    if not message.verified:
                        continue
                    heartbeat.seen(line)
                    note = progress.line(message)
                    if note:
                        print(note, file=self.err, flush=True)
                        heartbeat.said()
                    to_me = message.from_ == self.foreman and bare(message.to) == operator
                    if not (to_me and message.type == "reply"):
                        continue
                    data = message.data or {}
                    if data.get("final"):
                        self._show(message)
                        if data.get("cancelled"):
                            print(f"the run {self.thread} was cancelled", file=self.err)
                        return self._result(outcome_code(message), line)
                    if is_dig_report(message):
                        self._show(message)
                        if await self._answer(message) is None:
                            print(continue_hint(self.thread), file=self.err)
                            return self._result(EXIT_OK, line)
                    elif data.get("outcome") == "missing":
                        self._show(message)
                        print(anchor_hint(self.thread), file=self.err)
                        return self._result(EXIT_MISSING, line)
                    elif data.get("outcome") == "unclear":
                        print(message.body, file=self.err, flush=True)
                        again = await self._answer(message) if self.interactive else None
                        if again is None:
                            print(continue_hint(self.thread), file=self.err)
                            return EXIT_UNCLEAR
                    else:
                        print(message.body, file=self.err, flush=True)
                        continue
                    # the operator answered: the next turn gets a fresh wait
                    answered = True
                    turn.reschedule(asyncio.get_running_loop().time() + timeout)
        except TimeoutError:
            pass
        print(timeout_hint(self.thread, timeout, answered), file=self.err)
        return EXIT_TIMEOUT

    def _show(self, message: Message) -> None:
        """A report for the operator: on stdout, or on stderr when stdout is --json's."""
        print(message.body, file=self.err if self.as_json else self.out, flush=True)

    def _result(self, code: int, line: dict[str, Any]) -> int:
        """`code`, after printing the JSON result (--json) of the report it ends with."""
        if self.as_json:
            print(final_json(self.thread, code, line), file=self.out, flush=True)
        return code

    def _ended(self, report: Message) -> int:
        """The run ended from elsewhere while the prompt waited: say so, and its exit code."""
        print("", file=self.out)  # the prompt's line was left open
        print(report.body, file=self.out, flush=True)
        how = "cancelled" if (report.data or {}).get("cancelled") else "ended"
        print(
            f"the run {self.thread} was {how} while this prompt waited; nothing typed here "
            "was posted",
            file=self.err,
            flush=True,
        )
        return outcome_code(report)

    async def _answer(self, report: Message) -> int | None:
        """Post the operator's answer (by --yes or at the terminal); None leaves the run waiting.
        RunEnded when the run ends while the prompt waits (a `bullpen cancel` elsewhere)."""
        if self.yes:
            body, data = answer_post()
        elif self.interactive:
            typed = await typed_unless_ended(
                self.client, self.thread, self.foreman, self.out, report.seq
            )
            typed = typed.strip()
            if not typed:
                return None
            body, data = typed, {}
        else:
            return None
        return await post_answer(self.client, report, self.thread, body, data, self.foreman)


async def post_answer(
    client: RoomClient,
    report: Message,
    thread: str,
    body: str,
    data: dict[str, Any],
    foreman: str = FOREMAN,
) -> int:
    posted = await client.say(
        f"@{foreman}",
        body,
        type="reply",
        data=data or None,
        in_reply_to=report.id,
        thread=thread,
    )
    return int(posted.get("seq", 0))


async def expedition(
    home: Home,
    *,
    title: str,
    keyword: str,
    kb: str | None = None,
    voice: str = "Carbon",
    archetype: str | None = None,
    monomyth: str | None = None,
    blaze: str | None = None,
    briefs: str | None = None,
    yes: bool = False,
    timeout: float = 900.0,
    out: TextIO | None = None,
    err: TextIO | None = None,
    as_json: bool = False,
    budget: RunBudget | None = None,
) -> int:
    """Start an expedition, follow it to its Dig Report, and confirm it if told to."""
    out, err = out or sys.stdout, err or sys.stderr
    data = request_data(
        title=title,
        keyword=keyword,
        kb=kb,
        voice=voice,
        archetype=archetype,
        monomyth=monomyth,
        blaze=blaze,
        briefs=briefs,
    )
    try:  # an ask may only narrow the run to paths under the roots; step 0 checks again
        ExpeditionConfig.of(home).paths(
            home, kb=data.get("kb"), blaze=data.get("blaze"), briefs=data.get("briefs")
        )
    except OutsideRoot as exc:
        print(exc.message, file=err)
        return EXIT_USAGE
    thread = new_thread()
    data.update(ticket_context(thread, budget))  # its trace and its own budget, carried on
    async with home.client(home.society.operator) as client:
        await require_listening(client, FOREMAN)  # else nothing would ever answer
        posted = await client.say(
            f"@{FOREMAN}", f"expedition: {title} ({keyword})", type="ask", data=data, thread=thread
        )
        print(f"expedition {thread} started", file=err, flush=True)
        interactive = not yes and sys.stdin.isatty()
        follower = Follower(
            home, client, thread, out, err, yes=yes, interactive=interactive, as_json=as_json
        )
        return await follower.follow(int(posted.get("seq", 0)), timeout)


def not_a_run(messages: Sequence[Message], thread: str) -> str | None:
    """Why `thread` is not an expedition to confirm, or None when it is one."""
    starts = [m for m in messages if m.type == "ask" and bare(m.to) == FOREMAN]
    if not starts:
        return (
            f"There is no expedition with the thread {thread} in the room: no ask to "
            f"@{FOREMAN} carries it. Use the thread `bullpen expedition` printed when the run "
            f"started (`expedition exp-… started`), or find it with:\n"
            "  bullpen runs --kind expedition"
        )
    pipeline = (starts[0].data or {}).get("pipeline")
    if pipeline and pipeline != "expedition":
        return (
            f"The thread {thread} is a {pipeline} run, not an expedition; find the "
            f"expedition's thread with `bullpen runs --kind expedition`."
        )
    return None


def reports_of(
    messages: Sequence[Message],
    operator: str,
    foreman: str = FOREMAN,
    *,
    missing: bool = False,
) -> tuple[Message | None, list[Message]]:
    """A run's final report (None while it runs) and its Dig Reports, oldest first.

    `missing`: count a MISSING brief (waiting for a voice anchor) among the
    reports the operator can answer, as `confirm --anchor` does.
    """
    ours = [
        m for m in messages if m.from_ == foreman and bare(m.to) == operator and m.type == "reply"
    ]
    final = next((m for m in ours if (m.data or {}).get("final")), None)
    waiting = [
        m
        for m in ours
        if is_dig_report(m) or (missing and (m.data or {}).get("outcome") == "missing")
    ]
    return final, waiting


async def confirm(
    home: Home,
    thread: str,
    drop: Sequence[str] = (),
    redirect: str | None = None,
    *,
    anchor: str | None = None,
    timeout: float = 900.0,
    out: TextIO | None = None,
    err: TextIO | None = None,
    as_json: bool = False,
) -> int:
    """Answer a waiting run's latest Dig Report or MISSING brief, then follow it.

    `anchor`: a file of the run's knowledge base as the voice anchor; it is
    checked here with the briefer's gates, and refused (exit 2, nothing posted)
    with the reason when it fails one.
    """
    out, err = out or sys.stdout, err or sys.stderr
    operator = home.society.operator
    async with home.client(operator) as client:
        messages = await read_thread(client, thread)
        problem = not_a_run(messages, thread)
        if problem:
            print(problem, file=err)
            return EXIT_USAGE
        final, reports = reports_of(messages, operator, missing=True)
        if final is not None:
            print(f"The run {thread} is already over:", file=err)
            print(final.body, file=out)
            return outcome_code(final)
        if not reports:
            print(
                f"The run {thread} has no Dig Report yet; wait for it (or check the thread id "
                "with `bullpen read --thread`), then confirm.",
                file=err,
            )
            return EXIT_FAILED
        waiting = reports[-1]
        problem, named = check_answer_to(home, messages, waiting, drop, redirect, anchor)
        if problem:
            print(problem, file=err)
            return EXIT_USAGE
        body, data = answer_post(drop, redirect, named)
        after = await post_answer(client, waiting, thread, body, data)
        what = "Dig Report" if is_dig_report(waiting) else "MISSING brief"
        print(f"answered the {what} in {thread}: {body}", file=err, flush=True)
        follower = Follower(home, client, thread, out, err, as_json=as_json)
        return await follower.follow(after, timeout, answered=True)


def check_answer_to(
    home: Home,
    messages: Sequence[Message],
    waiting: Message,
    drop: Sequence[str],
    redirect: str | None,
    anchor: str | None,
) -> tuple[str | None, str | None]:
    """(why this answer cannot be posted, None), or (None, the anchor's name in the kb or None).

    A MISSING brief is answered only with a file (`--anchor`); a Dig Report with
    confirm, drops and a file, or a redirect. The file must pass the gates.
    """
    thread = waiting.thread or ""
    if not is_dig_report(waiting) and (not anchor or drop or redirect is not None):
        return (
            f"The run {thread} has a Dig Report already answered and its brief is MISSING a "
            f"voice anchor; answer it with a lived file of the knowledge base:\n"
            f"  bullpen expedition confirm {thread} --anchor FILE"
        ), None
    if not anchor:
        return None, None
    start = next(m for m in messages if m.type == "ask" and bare(m.to) == FOREMAN)
    try:
        entry = anchor_for_run(home, dict(start.data or {}), anchor)
    except AnchorRefused as exc:
        return f"--anchor refused, nothing was posted: {exc.message}", None
    return None, str(entry["file"])

"""`bullpen backpass`: ask the foreman for a run, follow it, print the funnel, exit by the result.

The command does no backpass work itself: it resolves `[backpass]` and the
command-line overrides into absolute paths, checks them, posts one ask to
`@foreman` as the operator in a new thread `backpass-<date>-<random>`, and
long-polls that thread. Progress goes to stderr (`step 2/5 analysis 12/43`,
rewritten in place on a terminal, one plain line per change in a pipe, under
systemd or with TERM=dumb); the funnel goes to stdout.

Exit codes: 0 the run finished and no trace failed; 1 a trace or a step
failed (see the funnel), or no foreman answered a ping (nothing was posted);
5 the run was cancelled (`bullpen cancel`); 75 no final report within
`wait_timeout` (the run may still be going; its thread is printed); 130 Ctrl-C
(the run cancelled, or left going). Bad input is refused before the
ask is posted, with nothing written: a UsageError (exit 2) for a bad
command-line option, a ConfigError (exit 78) for a bad `[backpass]` value.
That includes a path outside its `[roots]` folder, a seat chosen with
--bulk / --synthesis (or BULLPEN_BULK_SEAT / BULLPEN_SYNTHESIS_SEAT) that no
`[seats.X]` table names, a
state file that is not one (another file named by mistake
would be overwritten), a state folder that is missing or not writable, and
a wait, timeout or concurrency that is not a usable number, and (unless
--report-only) a memory repository that is not a git repository yet.
"""

from __future__ import annotations

import asyncio
import math
import os
import secrets
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from agents.backpass.config import BackpassConfig, RunParams
from agents.backpass.onerun import EXIT_BUSY, BackpassBusy, one_backpass, open_backpass
from agents.backpass.pipeline import NICKS
from agents.backpass.relay import announce
from agents.backpass.seating import choose_seats
from agents.backpass.traces import StateFileError, check_state
from agents.roots import OutsideRoot
from agents.runticket import ticket_context
from agents.runtime.cancel import EXIT_CANCELLED
from agents.runtime.finaljson import final_json
from agents.runtime.waiting import Heartbeat, follow_run, require_listening
from room.errors import BullpenError, ConfigError, UsageError

if TYPE_CHECKING:
    from agents.backpass.config import RunParams
    from agents.gateway.runbudgets import RunBudget
    from agents.home import Home

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_WAIT", "FOREMAN", "Progress", "backpass", "new_thread"]

FOREMAN = "foreman"
EXIT_OK, EXIT_FAILED, EXIT_WAIT = 0, 1, 75
DEFAULT_WAIT_S = 4 * 3600.0
POLL_S = 25.0
MAX_CONCURRENCY = 64  # as [backpass] concurrency allows
SYNC_WAIT_S = 10.0  # for the librarian's answer to each save of the memory sync


def new_thread(now: datetime | None = None) -> str:
    day = (now or datetime.now(UTC)).strftime("%Y-%m-%d")
    return f"backpass-{day}-{secrets.token_hex(3)}"


# The run's steps as progress shows them: `step k/5 <name>`, numbered as in docs/backpass.md.
STEPS = ("list", "analysis", "quote check", "ledger", "synthesis and git")
REPORT_ONLY_STEPS = (*STEPS[:4], "synthesis")  # --report-only makes no branch: no git step
_STEP_OF_STAGE = {"list": 1, "analysis": 2, "quotes": 3, "ledger": 4, "synthesis": 5}


def rewrites_in_place(stream: TextIO, term: str | None) -> bool:
    """A terminal that understands `\\r` and erase-line: a tty whose TERM is set and not dumb.

    NO_COLOR is not consulted: progress has no colour, only the rewrite."""
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return tty and term not in (None, "", "dumb")


class Progress:
    """Which step of five the run is in, and how many analyses of how many replied, on stderr."""

    def __init__(
        self, stream: TextIO, term: str | None = None, *, report_only: bool = False
    ) -> None:
        self.stream = stream
        self.steps = REPORT_ONLY_STEPS if report_only else STEPS
        self.tty = rewrites_in_place(stream, term if term is not None else os.environ.get("TERM"))
        self.total: int | None = None
        self.analysed = 0
        self.step = 1
        self._last = ""

    def see(self, line: dict[str, Any]) -> None:
        sender, kind = line.get("from"), line.get("type")
        data = line.get("data") or {}
        if kind == "reply" and sender == NICKS["list"] and not data.get("failed"):
            self.total = len(data.get("traces") or [])
            self.step = 2 if self.total else self.step  # nothing pending: the report is next
        elif kind == "reply" and sender == NICKS["analysis"]:
            self.analysed += 1
        elif kind == "ask" and sender == FOREMAN:
            to = str(line.get("to", "")).removeprefix("@")
            stage = {v: k for k, v in NICKS.items()}.get(to)
            if stage and stage != "analysis":
                self.step = _STEP_OF_STAGE[stage]
        self._show()

    def text(self) -> str:
        text = f"step {self.step}/{len(self.steps)} {self.steps[self.step - 1]}"
        if self.step == 2 and self.total is not None:
            text += f" {self.analysed}/{self.total}"
        return text

    def _show(self) -> None:
        text = self.text()
        if text == self._last:
            return
        self._last = text
        if self.tty:
            self.stream.write(f"\r\x1b[K{text}")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self._last:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _positive_seconds(flag: str, value: float | None, meaning: str) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(
            f"{flag} must be a positive number of seconds ({meaning}), not {value:g}; "
            f"leave {flag} out for the default"
        )


def check_options(*, concurrency: int | None, timeout: float | None, wait_timeout: float) -> None:
    """Refuse command-line numbers no run could use, before anything is asked."""
    _positive_seconds("--wait-timeout", wait_timeout, "how long to wait for the final report")
    _positive_seconds("--timeout", timeout, "the hard limit on one trace's analysis")
    if concurrency is not None and not 1 <= concurrency <= MAX_CONCURRENCY:
        raise UsageError(
            f"--concurrency must be a whole number from 1 to {MAX_CONCURRENCY} (analyses in "
            f"flight at once), not {concurrency}; leave it out for [backpass] concurrency"
        )


def check_state_option(home: Home, params: RunParams, *, from_option: bool) -> None:
    """Refuse a state file the run could not read as one or replace, before anything is asked."""
    setting = "--state" if from_option else "[backpass] state"
    try:
        check_state(params.path(home, "state"), write=not params.report_only, setting=setting)
    except StateFileError as exc:
        if from_option:
            raise UsageError(f"--state: {exc}") from None
        raise ConfigError(f"{home.society_file}: [backpass] state: {exc}") from None


def check_roots(home: Home, params: RunParams, options: dict[str, str | None]) -> None:
    """Refuse a path outside its [roots] folder before anything is asked (the steps check too).

    A command-line path may only narrow the run to a folder under its root: --traces
    pointing at the home's secrets would hand them to the bulk model."""
    try:
        params.confine(home)
    except OutsideRoot as exc:
        key = str(exc.details.get("key"))
        if options.get(key) is not None:
            raise UsageError(f"--{key}: {exc.message}") from None
        raise ConfigError(f"{home.society_file}: [backpass] {key}: {exc.message}") from None


def check_repos(home: Home, params: RunParams) -> None:
    """A run that writes needs its two memory repositories to be git repositories already:
    a plain `bullpen init` home has none, and would learn it only after the run was posted."""
    for key in ("public", "private"):
        path = params.path(home, key)
        if not (path / ".git").exists():
            raise ConfigError(
                f"the {key} memory repository {path} is not a git repository, and a backpass "
                f"proposes its lessons there on a branch. Create it (`git init {path}`), point "
                f"[backpass] {key} in {home.society_file} at yours (`bullpen init --demo` lays "
                "down samples), or run with --report-only, which writes nothing. Nothing was "
                "posted"
            )


def _final(line: dict[str, Any]) -> dict[str, Any] | None:
    data = line.get("data") or {}
    if (
        line.get("from") == FOREMAN
        and line.get("verified")
        and line.get("type") == "reply"
        and data.get("final")
    ):
        return data
    return None


async def _sync_memory(home: Home, err: TextIO) -> None:
    """Index what was merged since the last run (docs/memory.md); a run never waits on it."""
    from agents.librarian.sync import sync

    try:
        for line in await sync(home, wait_s=SYNC_WAIT_S):
            err.write(f"memory sync: {line}\n")
    except BullpenError as exc:
        err.write(f"memory sync skipped: {exc.message}\n")


async def backpass(
    home: Home,
    *,
    public: str | None = None,
    private: str | None = None,
    traces: str | None = None,
    state: str | None = None,
    report_only: bool = False,
    concurrency: int | None = None,
    timeout: float | None = None,
    wait_timeout: float = DEFAULT_WAIT_S,
    bulk: str | None = None,
    synthesis: str | None = None,
    env: Mapping[str, str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    as_json: bool = False,
    budget: RunBudget | None = None,
) -> int:
    """Run the memory backpass through the foreman; the exit code (see the module docstring)."""
    out = out or sys.stdout
    err = err or sys.stderr
    check_options(concurrency=concurrency, timeout=timeout, wait_timeout=wait_timeout)
    config = BackpassConfig.from_home(home)
    params = config.run_params(
        home,
        report_only=report_only,
        public=public,
        private=private,
        traces=traces,
        state=state,
        concurrency=concurrency,
        timeout_s=timeout,
    )
    check_roots(
        home, params, {"public": public, "private": private, "traces": traces, "state": state}
    )
    check_state_option(home, params, from_option=state is not None)
    seats, choice = choose_seats(
        home, {"bulk": bulk, "synthesis": synthesis}, os.environ if env is None else env
    )
    params = params.model_copy(update={"seats": seats, "seat_choice": choice})
    if not report_only:
        check_repos(home, params)
        await _sync_memory(home, err)
    try:
        with one_backpass(home) as holds:
            await open_backpass(home)
            return await _post_and_follow(
                home, params, report_only, wait_timeout, out, err, holds, as_json, budget
            )
    except BackpassBusy as busy:
        err.write(f"bullpen: {busy.message}\n")
        return EXIT_BUSY


async def _post_and_follow(
    home: Home,
    params: RunParams,
    report_only: bool,
    wait_timeout: float,
    out: TextIO,
    err: TextIO,
    holds: Callable[[str], None],
    as_json: bool = False,
    budget: RunBudget | None = None,
) -> int:
    """Post the run's ask (the home's backpass lock held) and follow it to its funnel."""
    thread = new_thread()
    body = "backpass" + (" (report only)" if report_only else "") + f": traces in {params.traces}"
    data = {"pipeline": "backpass", **params.model_dump(), **ticket_context(thread, budget)}
    progress = Progress(err, report_only=report_only)
    async with home.client(home.society.operator) as client:
        await require_listening(client, FOREMAN)  # else nothing would ever answer
        stored = await client.say(f"@{FOREMAN}", body, type="ask", data=data, thread=thread)
        err.write(f"backpass run {thread} asked of @{FOREMAN} (seq {stored.get('seq')})\n")
        holds(thread)  # a second backpass is told which run holds the lock
        after = int(stored.get("seq", 0))

        async def follow(heartbeat: Heartbeat) -> int:
            try:
                async with asyncio.timeout(wait_timeout):
                    async for line in client.follow(after, thread=thread, wait=POLL_S):
                        progress.see(line)
                        heartbeat.seen(line)
                        data = line.get("data") or {}
                        if line.get("from") == NICKS["list"]:  # the relay, as the run starts
                            err.writelines(
                                f"{text}\n" for text in announce(data.get("relays") or [])
                            )
                        if line.get("verified") and data.get("final") and data.get("cancelled"):
                            progress.done()
                            said = str(line.get("body", "")).rstrip("\n")
                            out.write(
                                (final_json(thread, EXIT_CANCELLED, line) if as_json else said)
                                + "\n"
                            )
                            err.write(f"the run {thread} was cancelled\n")
                            return EXIT_CANCELLED
                        result = _final(line)
                        if result is not None:
                            progress.done()
                            ok = bool(result.get("ok")) and not result.get("failed_traces")
                            code = EXIT_OK if ok else EXIT_FAILED
                            said = str(line.get("body", "")).rstrip("\n")
                            out.write((final_json(thread, code, line) if as_json else said) + "\n")
                            out.flush()
                            return code
            except TimeoutError:
                pass
            return EXIT_WAIT

        code = await follow_run(follow, client, thread, err, FOREMAN)
        if code != EXIT_WAIT:
            return code
    progress.done()
    err.write(
        f"no final report from @{FOREMAN} within {wait_timeout:.0f} s; the run may still be "
        f"going: its thread is {thread}. Check that the hub, the foreman and the backpass "
        "lurkers are running\n"
    )
    return EXIT_WAIT

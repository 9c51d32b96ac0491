"""`bullpen backpass`: ask the foreman for a run, follow it, print the funnel, exit by the result.

The command does no backpass work itself: it resolves `[backpass]` and the
command-line overrides into absolute paths, posts one ask to `@foreman` as
the operator in a new thread `backpass-<date>-<random>`, and long-polls
that thread. Progress goes to stderr (`analysis 12/43`, rewritten in place
on a terminal, one line per change otherwise); the funnel goes to stdout.

Exit codes: 0 the run finished and no trace failed; 1 a trace or a step
failed (see the funnel); 75 no final report within `wait_timeout` (the run
may still be going; its thread is printed). Errors before the ask is
posted (a bad configuration, no hub) propagate as BullpenError for the CLI.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from agents.backpass.config import BackpassConfig
from agents.backpass.pipeline import NICKS

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_WAIT", "FOREMAN", "backpass", "new_thread"]

FOREMAN = "foreman"
EXIT_OK, EXIT_FAILED, EXIT_WAIT = 0, 1, 75
DEFAULT_WAIT_S = 4 * 3600.0
POLL_S = 25.0


def new_thread(now: datetime | None = None) -> str:
    day = (now or datetime.now(UTC)).strftime("%Y-%m-%d")
    return f"backpass-{day}-{secrets.token_hex(3)}"


class Progress:
    """What the run is doing, on stderr: rewritten in place on a terminal, plain lines otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.total: int | None = None
        self.analysed = 0
        self.stage = "list"
        self._last = ""

    def see(self, line: dict[str, Any]) -> None:
        sender, kind = line.get("from"), line.get("type")
        data = line.get("data") or {}
        if kind == "reply" and sender == NICKS["list"] and not data.get("failed"):
            self.total = len(data.get("traces") or [])
            self.stage = "analysis"
        elif kind == "reply" and sender == NICKS["analysis"]:
            self.analysed += 1
        elif kind == "ask" and sender == FOREMAN:
            to = str(line.get("to", "")).removeprefix("@")
            stage = {v: k for k, v in NICKS.items()}.get(to)
            if stage and stage != "analysis":
                self.stage = {"quotes": "quote check", "synthesis": "synthesis and git"}.get(
                    stage, stage
                )
        self._show()

    def _show(self) -> None:
        if self.stage == "analysis" and self.total is not None:
            text = f"analysis {self.analysed}/{self.total}"
        else:
            text = self.stage
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
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run the memory backpass through the foreman; the exit code (see the module docstring)."""
    out = out or sys.stdout
    err = err or sys.stderr
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
    thread = new_thread()
    body = "backpass" + (" (report only)" if report_only else "") + f": traces in {params.traces}"
    data = {"pipeline": "backpass", **params.model_dump()}
    progress = Progress(err)
    async with home.client(home.society.operator) as client:
        stored = await client.say(f"@{FOREMAN}", body, type="ask", data=data, thread=thread)
        err.write(f"backpass run {thread} asked of @{FOREMAN} (seq {stored.get('seq')})\n")
        after = int(stored.get("seq", 0))
        try:
            async with asyncio.timeout(wait_timeout):
                async for line in client.follow(after, thread=thread, wait=POLL_S):
                    progress.see(line)
                    result = _final(line)
                    if result is not None:
                        progress.done()
                        out.write(str(line.get("body", "")).rstrip("\n") + "\n")
                        out.flush()
                        ok = bool(result.get("ok")) and not result.get("failed_traces")
                        return EXIT_OK if ok else EXIT_FAILED
        except TimeoutError:
            pass
    progress.done()
    err.write(
        f"no final report from @{FOREMAN} within {wait_timeout:.0f} s; the run may still be "
        f"going: its thread is {thread}. Check that the hub, the foreman and the backpass "
        "lurkers are running\n"
    )
    return EXIT_WAIT

"""Waits a person can answer, driven in a real terminal (tmux): `bullpen expedition` at its
Dig Report prompt answers Ctrl-C at once, a second Ctrl-C still prints how to follow and
cancel the run, and a `bullpen cancel` from another shell ends the waiting command (exit 5);
the foreman refuses a reply sent to the ended run, in the room."""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.runtime.waiting import Heartbeat
from tests.expedition.lurkers import expedition_society
from tests.support import REPO, Society, run_cli, wait_for

EXPEDITION = ("expedition", "--title", "Waiting Is Part of the Work", "--keyword", "patience")
PROMPT = "confirm / confirm, drop row_N"
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


class Terminal:
    """One command in a tmux pane of a private tmux server; its exit code lands in a file."""

    def __init__(
        self, tmp: Path, home: Path, *args: str, env: dict[str, str] | None = None
    ) -> None:
        self.socket = f"bullpen-test-{secrets.token_hex(4)}"
        self.code = tmp / f"{self.socket}.code"
        argv = [sys.executable, "-m", "agents.cli", "--home", str(home), *args]
        extra = " ".join(f"{key}={shlex.quote(value)}" for key, value in (env or {}).items())
        script = (
            f"cd {shlex.quote(str(REPO))} && env {extra} PYTHONPATH={shlex.quote(os.environ.get('PYTHONPATH', str(REPO)))} "
            f"{shlex.join(argv)}; echo $? > {shlex.quote(str(self.code))}; sleep 300"
        )
        self.tmux("new-session", "-d", "-s", "t", "-x", "220", "-y", "60", script)

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", "t", "-S", "-500")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def wait_screen(self, text: str, timeout: float = 60) -> str:
        return wait_for(lambda: text in self.screen() and self.screen(), timeout, repr(text))

    def exit_code(self, timeout: float = 30) -> int:
        wait_for(lambda: self.code.exists() and self.code.read_text().strip(), timeout, "exit")
        return int(self.code.read_text())

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=20)


@pytest.fixture
def society(tmp_path: Path) -> Iterator[Society]:
    yield from expedition_society(tmp_path / "home")


def thread_on(screen: str) -> str:
    for word in screen.split():
        if word.startswith("exp-"):
            return word.rstrip(".,:")
    raise AssertionError(screen)


def test_ctrl_c_at_the_prompt_answers_at_once_and_a_second_one_still_says_how_out(
    society: Society, tmp_path: Path
) -> None:
    term = Terminal(tmp_path, society.root, *EXPEDITION)
    try:
        screen = term.wait_screen(PROMPT, 180)
        assert "checking that @foreman is listening" in screen  # the ping says what it waits on
        thread = thread_on(screen)
        term.keys("C-c")  # no Enter: the question comes at once
        term.wait_screen(f"cancel the run {thread} [c], or detach", 10)
        term.keys("C-c")  # a second Ctrl-C detaches, and still says how to cancel
        assert term.exit_code() == 130
        screen = term.screen()
        assert f"detached: the run {thread} goes on in the room" in screen
        assert f"bullpen cancel {thread}" in screen
    finally:
        term.close()
    (run,) = [r for r in _runs(society) if r["thread"] == thread]
    assert run["state"] == "waiting"  # detaching left the run at its gate


def test_a_cancel_from_another_shell_ends_the_prompt_and_a_late_reply_is_refused(
    society: Society, tmp_path: Path
) -> None:
    term = Terminal(tmp_path, society.root, *EXPEDITION)
    try:
        thread = thread_on(term.wait_screen(PROMPT, 180))
        cancelled = run_cli(society.root, "cancel", thread, "--reason", "from elsewhere")
        assert cancelled.returncode == 0, cancelled.stderr
        assert term.exit_code() == 5
        assert f"the run {thread} was cancelled while this prompt waited" in term.screen()
    finally:
        term.close()
    report = next(
        line
        for line in society.lines()
        if line.get("thread") == thread and "DIG REPORT" in str(line.get("body"))
    )
    late = run_cli(
        society.root,
        "say",
        "@foreman",
        "confirm",
        "--type",
        "reply",
        "--reply-to",
        report["id"],
        "--thread",
        thread,
    )
    assert late.returncode == 0, late.stderr

    def refusal() -> dict | None:
        return next(
            (
                line
                for line in society.lines()
                if line.get("from") == "foreman" and "[RUN ENDED" in str(line.get("body"))
            ),
            None,
        )

    said = wait_for(refusal, 30, "the foreman to refuse the late reply")
    assert f"the run {thread} is cancelled" in said["body"] and said["verified"] is True
    asks = [line for line in society.lines() if line.get("thread") == thread]
    assert not any(line.get("to") == "@briefer" for line in asks)  # nothing acted on it


def _runs(society: Society) -> list[dict]:
    import json

    listed = run_cli(society.root, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def test_the_heartbeat_names_the_operator_at_the_gate() -> None:
    """While a Dig Report waits for its answer, the run waits on the operator, not @foreman;
    once answered, on the foreman again."""
    import io

    beat = Heartbeat(io.StringIO())
    assert "waiting on @foreman" in beat.status()
    beat.seen({"from": "foreman", "to": "@ada", "type": "reply", "data": {"key": "dig-report"}})
    assert beat.status().startswith("… waiting on @ada (you): the report above waits at the gate")
    beat.seen({"from": "ada", "to": "@foreman", "type": "reply", "body": "confirm"})
    assert "waiting on @foreman" in beat.status()


def test_at_the_prompt_the_terminal_heartbeat_names_the_operator(
    society: Society, tmp_path: Path
) -> None:
    """Issue 35, in a real terminal: while the Dig Report waits at the prompt, the heartbeat
    says the run waits on the operator (you), not on @foreman, and says how out."""
    term = Terminal(tmp_path, society.root, *EXPEDITION, env={"BULLPEN_HEARTBEAT_S": "1"})
    try:
        term.wait_screen(PROMPT, 180)
        operator = society.home.society.operator
        screen = term.wait_screen(f"… waiting on @{operator} (you): the report above waits", 30)
        after_prompt = screen[screen.index(PROMPT) :]
        assert "waiting on @foreman" not in after_prompt
        assert "Ctrl-C to cancel or detach" in after_prompt
        term.keys("C-c")
        term.wait_screen("or detach and leave it running [d]?", 10)
        term.keys("d", "Enter")
        assert term.exit_code() == 130
    finally:
        term.close()

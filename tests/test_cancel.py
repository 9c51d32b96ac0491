"""Stopping a run: `bullpen cancel`, a step told mid-step, and commands that never wait in
silence (issue 27). Real hub, foreman and step lurkers; the commands run as processes."""

from __future__ import annotations

import asyncio
import io
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.runtime.waiting import Heartbeat
from tests.support import Society, add_nick, bullpen_argv, run_cli, wait_for
from tests.test_foreman import final_report, relay, thread_of


def _spinner(society: Society, tmp_path: Path) -> Path:
    """A nick whose step burns CPU until stopped, after writing down its pid."""
    pid_file = tmp_path / "spin.pid"
    add_nick(society.root, "spinner", handler="tests.tools.steps:spin", timeout_s=300)
    society.start_hub()
    society.start_lurker("foreman")
    society.start_lurker("spinner", env={"BULLPEN_TEST_SPIN_PID": str(pid_file)})
    return pid_file


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "zombie" not in status.lower()


def test_cancel_stops_the_run_and_the_step_that_is_running(
    society: Society, tmp_path: Path
) -> None:
    """The operator cancels a run whose step is mid-work: the foreman reports CANCELLED (final),
    the step's lurker kills the step and replies with a CANCELLED flag, and nothing more is
    asked in the run."""
    pid_file = _spinner(society, tmp_path)
    relay(society, "spin-1", ["spinner"])
    wait_for(pid_file.exists, 30, "the step to start spinning")
    step_pid = int(pid_file.read_text())
    assert _alive(step_pid)

    done = run_cli(society.root, "cancel", "spin-1", "--reason", "changed my mind")
    assert done.returncode == 0, done.stderr
    assert "[RUN CANCELLED — changed my mind]" in done.stdout
    report = final_report(society, "spin-1")
    assert report is not None and report["data"]["cancelled"] is True
    assert report["verified"] is True and report["to"] == "@operator"
    reply = wait_for(
        lambda: next((m for m in thread_of(society, "spin-1") if m["from"] == "spinner"), None),
        30,
        "the step's cancelled reply",
    )
    assert reply["body"].startswith("[spinner CANCELLED — ") and reply["data"]["cancelled"]
    wait_for(lambda: not _alive(step_pid), 15, "the spinning step to be killed")
    asks = [
        m for m in thread_of(society, "spin-1") if m["from"] == "foreman" and m["type"] == "ask"
    ]
    assert len(asks) == 1  # the late reply was answered with nothing
    notice = [
        m for m in thread_of(society, "spin-1") if m["from"] == "foreman" and m["type"] == "chat"
    ]
    assert len(notice) == 1 and notice[0]["in_reply_to"] == asks[0]["id"]


def test_cancel_refuses_what_is_no_run_or_has_ended(society: Society) -> None:
    """An unknown thread and a finished run are refused (exit 2) and nothing is posted."""
    society.start_hub()
    society.start_lurker("foreman")
    society.start_lurker("echo")
    relay(society, "ended", ["echo"])
    wait_for(lambda: final_report(society, "ended"), 30, "the relay to end")
    before = len(society.lines())
    done = run_cli(society.root, "cancel", "exp-nosuch")
    assert done.returncode == 2 and "no run with the thread exp-nosuch" in done.stderr
    done = run_cli(society.root, "cancel", "ended")
    assert done.returncode == 2 and "has already ended" in done.stderr
    assert len(society.lines()) == before


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Society]:
    """A home with the demo knowledge base, so an expedition can start."""
    made = Society(tmp_path / "home", demo=True)
    try:
        yield made
    finally:
        made.stop_all()


def _expedition(society: Society, *extra: str) -> subprocess.Popen[str]:
    argv = bullpen_argv(
        society.root, "expedition", "--title", "Waiting", "--keyword", "patience", *extra
    )
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _stuck_expedition(society: Society, at: str = "termgen", *steps: str) -> None:
    """A society whose expedition hangs at the step `at` (by default step 1: its termgen
    never answers); `steps` are the other step nicks to start before it."""
    path = society.root / "society.toml"
    text = path.read_text()
    start = text.index(f"[nicks.{at}]")
    end = text.find("\n[", start + 1)
    table = f'[nicks.{at}]\nhandler = "tests.tools.steps:hang"\ntimeout_s = 300\n'
    path.write_text(text[:start] + table + (text[end:] if end != -1 else ""))
    society.start_hub()
    for nick in ("foreman", "context", *steps, at):
        society.start_lurker(nick)


def _thread_started(society: Society) -> str:
    def started() -> str | None:
        for m in society.lines():
            ours = m["from"] == "operator" and m["to"] == "@foreman" and m["type"] == "ask"
            if ours and (m.get("data") or {}).get("pipeline") == "expedition":
                return str(m["thread"])
        return None

    return wait_for(started, 60, "the expedition's ask")  # type: ignore[no-any-return]


def test_a_waiting_command_ends_when_its_run_is_cancelled_elsewhere(demo: Society) -> None:
    """`bullpen expedition` waiting on a stuck step ends at once, non-zero (5), saying the run
    was cancelled, when the operator cancels it from another shell."""
    _stuck_expedition(demo)
    command = _expedition(demo)
    try:
        thread = _thread_started(demo)
        done = run_cli(demo.root, "cancel", thread)
        assert done.returncode == 0, done.stderr
        out, err = command.communicate(timeout=60)
    finally:
        command.kill()
    assert command.returncode == 5, err
    assert "[RUN CANCELLED — cancelled by the operator]" in out
    assert f"the run {thread} was cancelled" in err


def test_ctrl_c_with_no_terminal_detaches_and_says_how_to_cancel(demo: Society) -> None:
    """SIGINT to a waiting command with no terminal: it detaches (exit 130), names the cancel
    command, and the run goes on (no CANCELLED report)."""
    _stuck_expedition(demo)
    command = _expedition(demo)
    try:
        thread = _thread_started(demo)
    except BaseException:
        command.kill()
        raise
    _interrupt_once_asked(demo, command, thread, None)
    assert final_report(demo, thread) is None


def _interrupt_once_asked(
    society: Society, command: subprocess.Popen[str], thread: str, nick: str | None
) -> None:
    """SIGINT to `command` once the foreman has asked a step (of `nick`, or any) in `thread`;
    it must detach: exit 130, the cancel command named, no traceback."""
    try:
        wait_for(
            lambda: any(
                m["from"] == "foreman"
                and m["type"] == "ask"
                and (nick is None or m["to"] == f"@{nick}")
                for m in thread_of(society, thread)
            ),
            60,
            f"the foreman's ask of {nick or 'a step'}",
        )
        command.send_signal(signal.SIGINT)
        _, err = command.communicate(timeout=30)
    finally:
        command.kill()
    assert command.returncode == 130, err
    assert f"bullpen cancel {thread}" in err and "detached" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def test_ctrl_c_while_confirm_waits_on_the_brief_detaches_too(demo: Society) -> None:
    """`bullpen expedition confirm` waits on the brief as the first command waited on the Dig
    Report: SIGINT there detaches the same way (exit 130, no traceback), the run goes on."""
    _stuck_expedition(demo, "briefer", "termgen", "retriever", "scorer", "scotoma", "excerpter")
    first = _expedition(demo)
    out, err = first.communicate(timeout=240)  # no terminal, no --yes: stops at the report
    assert first.returncode == 0 and "=== DIG REPORT ===" in out, err
    thread = _thread_started(demo)
    argv = bullpen_argv(demo.root, "expedition", "confirm", thread)
    command = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _interrupt_once_asked(demo, command, thread, "briefer")
    assert final_report(demo, thread) is None


def test_with_no_foreman_listening_the_command_fails_in_seconds(demo: Society) -> None:
    """No foreman lurker: `bullpen expedition` says so and what to start, exits non-zero within
    the ping's wait, and starts no run."""
    demo.start_hub()
    started = time.monotonic()
    command = _expedition(demo)
    _, err = command.communicate(timeout=90)
    assert command.returncode == 1, err
    assert "@foreman did not answer a ping" in err and "bullpen up" in err
    assert "Nothing was started" in err
    assert time.monotonic() - started < 60
    runs = [m for m in demo.lines() if (m.get("data") or {}).get("pipeline")]
    assert runs == []


def test_the_heartbeat_says_which_step_runs_and_for_how_long() -> None:
    """Fed the thread's lines, the status names the oldest step still asked, and says nothing
    while something else was printed within the period."""
    err = io.StringIO()
    beat = Heartbeat(err, every=30)
    ts = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - 75))
    ask: dict[str, Any] = {
        "from": "foreman",
        "type": "ask",
        "id": "a1",
        "to": "@scorer",
        "body": "step 3 score",
        "ts": ts,
    }
    beat.seen(ask)
    status = beat.status()
    assert status.startswith("… still running: @scorer step 3 score for 1m1") and "s" in status
    beat.seen({"from": "scorer", "type": "reply", "in_reply_to": "a1"})
    assert beat.status().startswith("… waiting on @foreman")


def test_the_heartbeat_prints_when_quiet() -> None:
    """A heartbeat with a short period prints a status line on its own."""
    import asyncio

    err = io.StringIO()

    async def run() -> None:
        beat = Heartbeat(err, every=0.3)
        task = asyncio.create_task(beat.run())
        try:
            async with asyncio.timeout(10):  # a deadline, polled: no bare sleep decides it
                while "… waiting on @foreman" not in err.getvalue():
                    await asyncio.sleep(0.05)
        finally:
            task.cancel()

    asyncio.run(run())
    assert "… waiting on @foreman" in err.getvalue()


def test_the_runs_page_cancels_a_run_with_its_csrf_token(society: Society, tmp_path: Path) -> None:
    """The Runs page shows a cancel button on a running run; posted without the page's CSRF
    token it is refused and nothing is posted; with it, the run ends CANCELLED."""
    from tests.web.browser import add_web, csrf_of, session_client, wait_web

    base = add_web(society)
    pid_file = _spinner(society, tmp_path)
    society.spawn("web", "web")
    wait_web(base)
    relay(society, "spin-web", ["spinner"])
    wait_for(pid_file.exists, 30, "the step to start spinning")
    with session_client(society.root) as client:
        page = client.get(f"{base}/runs").text
        assert 'action="/cancel/spin-web"' in page
        before = len(society.lines())
        refused = client.post(f"{base}/cancel/spin-web", data={"csrf": "forged"})
        assert refused.status_code == 403 and len(society.lines()) == before
        done = client.post(f"{base}/cancel/spin-web", data={"csrf": csrf_of(page)})
        assert done.status_code == 303, done.text
    report = wait_for(lambda: final_report(society, "spin-web"), 30, "the CANCELLED report")
    assert report["data"]["cancelled"] is True
    assert report["body"] == "[RUN CANCELLED — cancelled in the web view]"


def test_a_cancel_from_another_trusted_nick_is_ignored_and_said_so(
    society: Society, tmp_path: Path
) -> None:
    """Issue 33: any trusted nick stopped a run's step with a cancel notice in reply to the
    running ask. Only the nick that asked the step (the foreman, which does so only on the
    run's operator's cancel) may stop it: echo's notice, verified and trusted, leaves the
    step running, and the step's lurker answers it with a line saying it was ignored; the
    operator's cancel then stops it as before."""
    pid_file = _spinner(society, tmp_path)
    relay(society, "spin-2", ["spinner"])
    wait_for(pid_file.exists, 30, "the step to start spinning")
    step_pid = int(pid_file.read_text())
    ask = wait_for(
        lambda: next(
            (
                m
                for m in thread_of(society, "spin-2")
                if m["from"] == "foreman" and m["type"] == "ask"
            ),
            None,
        ),
        30,
        "the foreman's ask",
    )

    async def forge() -> dict[str, Any]:
        async with society.home.client("echo") as client:
            return await client.say(
                "@spinner",
                "the run spin-2 was cancelled: stop this step (forged)",
                type="chat",
                data={"cancel": True, "ask": ask["id"], "reason": "forged"},
                in_reply_to=ask["id"],
                thread="spin-2",
            )

    forged = asyncio.run(forge())
    assert forged["verified"] is True
    said = wait_for(
        lambda: next(
            (m for m in thread_of(society, "spin-2") if m.get("in_reply_to") == forged["id"]),
            None,
        ),
        30,
        "the step's lurker to say the cancel was ignored",
    )
    assert said["from"] == "spinner" and said["to"] == "@echo" and said["type"] == "reply"
    assert "IGNORED A CANCEL" in said["body"] and "@foreman" in said["body"]
    assert (said.get("data") or {}).get("cancel_ignored") is True
    # The lurker decides before it says so: a step it stopped would be dying or dead now.
    assert _alive(step_pid), "a cancel from echo stopped the foreman's step"
    answers = [
        m
        for m in thread_of(society, "spin-2")
        if m.get("in_reply_to") == ask["id"] and m["from"] == "spinner"
    ]
    assert answers == []  # no cancelled flag: it still works

    done = run_cli(society.root, "cancel", "spin-2", "--reason", "the operator's word")
    assert done.returncode == 0, done.stderr
    wait_for(lambda: not _alive(step_pid), 30, "the spinning step to be killed")

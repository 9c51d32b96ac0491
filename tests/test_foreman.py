"""The foreman runtime: sequencing through the room, from the thread alone."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from typing import Any

import pytest

from agents.home import Home
from agents.runtime.lurker import Lurker
from room.message import Message
from tests.support import Society, add_nick, run_cli, wait_for
from tests.test_lurker import replies_to, say


def relay(society: Society, thread: str, to: list[str], **extra: Any) -> dict[str, Any]:
    data = {"pipeline": "relay", "to": to, "text": f"hello from {thread}", **extra}
    return say(society, "@foreman", "relay", thread=thread, data=data)


def thread_of(society: Society, thread: str) -> list[dict[str, Any]]:
    return [m for m in society.lines() if m.get("thread") == thread]


def final_report(society: Society, thread: str) -> dict[str, Any] | None:
    for m in thread_of(society, thread):
        if m["from"] == "foreman" and (m.get("data") or {}).get("final"):
            return m
    return None


class _NoFiles:
    """An audit hook that refuses every file open while armed."""

    armed = False
    opened: list[str] = []  # noqa: RUF012 - shared on purpose: the hook cannot be removed

    @classmethod
    def hook(cls, event: str, args: tuple[Any, ...]) -> None:
        if cls.armed and event == "open":
            cls.opened.append(str(args[0]))
            raise PermissionError(f"the foreman opened a file: {args[0]}")


sys.addaudithook(_NoFiles.hook)


def test_foreman_handler_opens_no_file(society: Society) -> None:
    """The foreman's whole wake — reading the thread, deciding, composing asks — opens no file."""
    society.start_hub()
    ask = relay(society, "no-files", ["echo"])
    home = Home(society.root)
    lurker = Lurker(home, "foreman")  # loads config, secret and client before the guard

    async def wake() -> Any:
        _NoFiles.opened.clear()
        _NoFiles.armed = True
        try:
            return await lurker.handler.run(Message.model_validate(ask), lurker.ctx, 10)
        finally:
            _NoFiles.armed = False
            await lurker.client.aclose()

    outcome = asyncio.run(wake())
    assert _NoFiles.opened == []
    posts = outcome.posts
    assert [(p.to, p.type, p.data["key"]) for p in posts] == [("@echo", "ask", "relay/1")]
    assert posts[0].thread == "no-files"


def test_relay_run_end_to_end(society: Society) -> None:
    """The foreman asks, the step replies, the foreman reports to the operator and the run ends."""
    society.start_hub()
    society.start_lurker("foreman")
    society.start_lurker("echo")
    relay(society, "run-1", ["echo"])
    report = wait_for(lambda: final_report(society, "run-1"), 20, "the final report")
    assert report["to"] == "@operator" and report["type"] == "reply" and report["verified"]
    assert report["body"] == "@echo: echo: hello from run-1"
    kinds = [(m["from"], m["type"]) for m in thread_of(society, "run-1")]
    assert kinds == [
        ("operator", "ask"),
        ("foreman", "ask"),
        ("echo", "reply"),
        ("foreman", "reply"),
    ]


def test_in_flight_bound_and_join(society: Society) -> None:
    """With max_in_flight 1 the foreman never has two asks unanswered, and joins all replies."""
    for nick in ("w1", "w2", "w3"):
        add_nick(society.root, nick, handler="agents.examples:echo")
    society.start_hub()
    for nick in ("foreman", "w1", "w2", "w3"):
        society.start_lurker(nick)
    relay(society, "fan", ["w1", "w2", "w3"], max_in_flight=1)
    report = wait_for(lambda: final_report(society, "fan"), 30, "the joined report")
    assert set(report["data"]["replies"]) == {"w1", "w2", "w3"}
    pending = 0
    for m in thread_of(society, "fan"):
        if m["from"] == "foreman" and m["type"] == "ask":
            pending += 1
            assert pending <= 1
        elif m["type"] == "reply" and m["from"] != "foreman":
            pending -= 1


def test_overdue_step_is_reported(society: Society) -> None:
    """A step that never replies is reported to the operator as a STEP TIMEOUT, not waited on forever."""
    add_nick(society.root, "ghost", handler="agents.examples:echo")  # configured, never started
    text = (
        (society.root / "society.toml")
        .read_text()
        .replace("overdue_check_s = 5", "overdue_check_s = 0.2")
    )
    (society.root / "society.toml").write_text(text)
    society.start_hub()
    society.start_lurker("foreman")
    relay(society, "late", ["ghost"], overdue_s=1)
    report = wait_for(
        lambda: next((m for m in thread_of(society, "late") if "STEP TIMEOUT" in m["body"]), None),
        20,
        "the overdue report",
    )
    assert report["body"] == "[STEP TIMEOUT — @ghost did not reply in 1 s]"
    assert report["to"] == "@operator" and report["verified"]
    # reported once, not on every tick: watch ten more ticks (an observation window, not a wait)
    time.sleep(2.0)
    assert sum("STEP TIMEOUT" in m["body"] for m in thread_of(society, "late")) == 1


def test_foreman_restarted_mid_run_resumes_from_the_room(society: Society) -> None:
    """A foreman killed while a step works picks the run up from the thread after restarting."""
    add_nick(society.root, "slowpoke", handler="tests.tools.steps:slow", timeout_s=30)
    society.start_hub()
    foreman = society.start_lurker("foreman")
    society.start_lurker("slowpoke")
    relay(society, "resume", ["slowpoke"])
    wait_for(
        lambda: any(
            m["from"] == "foreman" and m["type"] == "ask" for m in thread_of(society, "resume")
        ),
        20,
        "the foreman's ask",
    )
    foreman.signal(signal.SIGKILL)
    foreman.proc.wait(10)
    wait_for(
        lambda: any(m["from"] == "slowpoke" for m in thread_of(society, "resume")),
        20,
        "the step's reply",
    )
    assert final_report(society, "resume") is None
    society.start_lurker("foreman")
    report = wait_for(lambda: final_report(society, "resume"), 20, "the report after the restart")
    assert report["body"] == "@slowpoke: slow done"
    asks = [
        m for m in thread_of(society, "resume") if m["from"] == "foreman" and m["type"] == "ask"
    ]
    assert len(asks) == 1


def test_unknown_pipeline_is_reported(society: Society) -> None:
    """An ask naming no known pipeline gets a final FAILED report listing the known ones."""
    society.start_hub()
    society.start_lurker("foreman")
    ask = say(society, "@foreman", "juggle", thread="odd", data={"pipeline": "juggle"})
    report = wait_for(lambda: final_report(society, "odd"), 20, "the failure report")
    assert "unknown pipeline 'juggle'" in report["body"] and "relay" in report["body"]
    assert replies_to(society, ask["id"]) == [report]


@pytest.mark.parametrize("thread", [None])
def test_ask_without_thread_fails_loud(society: Society, thread: None) -> None:
    """An ask to the foreman with no thread is answered with a FAILED reply saying why."""
    society.start_hub()
    society.start_lurker("foreman")
    ask = say(society, "@foreman", "relay", data={"pipeline": "relay", "to": ["echo"]})
    reply = wait_for(lambda: (replies_to(society, ask["id"]) or [None])[0], 20, "the reply")
    assert "needs a thread" in reply["body"]


def test_a_restarted_foreman_does_not_answer_a_ping_again(society: Society) -> None:
    """A ping is answered by the lurker itself; a foreman restarted after one must not take
    its thread for a run and answer it a second time (with an unknown-pipeline failure)."""
    text = (society.root / "society.toml").read_text()
    (society.root / "society.toml").write_text(
        text.replace("overdue_check_s = 5", "overdue_check_s = 0.2")
    )
    society.start_hub()
    foreman = society.start_lurker("foreman")
    ping = say(society, "@foreman", "ping", thread="check-1", data={"ping": True})
    wait_for(lambda: replies_to(society, ping["id"]), 20, "the pong")
    assert foreman.stop() == 0
    society.procs.remove(foreman)
    again = society.start_lurker("foreman")
    wait_for(lambda: "looked for open runs" in again.output(), 20, "the restart's first tick")
    # the tick that bootstraps also decides; watch a few more ticks (an observation window)
    time.sleep(1.0)
    assert [m["body"] for m in replies_to(society, ping["id"])] == ["pong"]
    assert '"threads": 0' in again.output()


def _register(society: Society, **pipelines: str) -> None:
    lines = "".join(f'{name} = "{target}"\n' for name, target in pipelines.items())
    path = society.root / "society.toml"
    path.write_text(path.read_text() + f"\n[pipelines]\n{lines}")


def test_an_operators_pipeline_plugs_in_from_society_toml(society: Society) -> None:
    """A `[pipelines]` entry is found by the run's first word, like a built-in pipeline."""
    _register(society, shout="tests.tools.pipelines:Shout")
    society.start_hub()
    society.start_lurker("foreman")
    society.start_lurker("echo")
    say(society, "@foreman", "shout", thread="loud", data={"text": "quiet words"})
    report = wait_for(lambda: final_report(society, "loud"), 20, "the shouted report")
    assert report["body"] == "ECHO: QUIET WORDS"
    assert report["data"]["shouted"] is True and report["verified"]


def test_an_unknown_pipeline_lists_every_registered_one(society: Society) -> None:
    """The failure for an unknown name lists the built-in pipelines and the operator's own."""
    _register(society, shout="tests.tools.pipelines:Shout")
    society.start_hub()
    society.start_lurker("foreman")
    say(society, "@foreman", "whisper", thread="which")
    report = wait_for(lambda: final_report(society, "which"), 20, "the failure report")
    assert report["body"] == (
        "[FOREMAN FAILED — unknown pipeline 'whisper'; known: backpass, build, expedition, relay, shout]"
    )


def test_a_broken_registration_stops_the_foreman_at_start(society: Society) -> None:
    """A `[pipelines]` class that is no pipeline is a configuration error (exit 78) naming it."""
    _register(society, odd="tests.tools.pipelines:NotAPipeline")
    result = run_cli(society.root, "lurk", "foreman", timeout=60)
    assert result.returncode == 78
    assert "pipeline 'odd' = 'tests.tools.pipelines:NotAPipeline' has no advance(run)" in (
        result.stderr
    )


def test_a_misspelt_pipeline_section_stops_the_foreman_at_start(society: Society) -> None:
    """Each pipeline checks its own section when the foreman starts: a misspelt key is exit 78."""
    path = society.root / "society.toml"
    path.write_text(path.read_text().replace("[backpass]\n", "[backpass]\nconcurency = 3\n", 1))
    result = run_cli(society.root, "lurk", "foreman", timeout=60)
    assert result.returncode == 78
    assert "backpass.concurency: unknown key" in result.stderr

"""Lessons on every wake: a lurker recalls the nick's own lessons (k = 8) and the top 2
general ones, hands them to its handler unasked, and its reply names the ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.memory.helpers import lesson_block_ids, post, save, saved_id, start_lurkers, wait_reply
from tests.support import Society, wait_for

OWN = "/bullpen/lessons-learned/{nick}"
GENERAL = "/bullpen/lessons-learned"


@pytest.fixture(scope="module")
def taught(hall: Society) -> dict[str, list[str]]:
    """Ten lessons for @stepper, three general, one for @forker, two for @shell and @agent."""
    saved: dict[str, list[str]] = {"stepper": [], "general": [], "forker": []}
    for n in range(10):
        word = "puffin" if n in (2, 7) else f"plain{n}"
        saved["stepper"].append(
            saved_id(save(hall, OWN.format(nick="stepper"), f"stepper lesson {n}: {word}"))
        )
    for n in range(3):
        saved["general"].append(saved_id(save(hall, GENERAL, f"general lesson {n}")))
    saved["forker"].append(saved_id(save(hall, OWN.format(nick="forker"), "forker's own lesson")))
    for nick in ("shell", "agent"):
        saved[nick] = [
            saved_id(save(hall, OWN.format(nick=nick), f"{nick} lesson {n}")) for n in (1, 2)
        ]
    return saved


def test_a_python_step_gets_8_own_and_2_general_lessons(hall: Society, taught: dict) -> None:
    """ctx.lessons: 8 of the nick's own, best matches first, then 2 from the general namespace
    itself (never another nick's lessons-learned/<nick>); the reply's data names them."""
    ask = post(hall, "@stepper", "what about the puffin?")
    reply = wait_reply(hall, ask["id"])
    got = reply["data"]["got"]
    own = [lesson for lesson in got if lesson["ns"] == OWN.format(nick="stepper")]
    general = [lesson for lesson in got if lesson["ns"] == GENERAL]
    assert len(own) == 8 and len(general) == 2 and len(got) == 10
    assert {lesson["id"] for lesson in own[:2]} == {taught["stepper"][2], taught["stepper"][7]}
    assert {lesson["id"] for lesson in general} <= set(taught["general"])
    assert taught["forker"][0] not in [lesson["id"] for lesson in got]
    assert reply["data"]["lessons"] == [lesson["id"] for lesson in got]
    assert set(got[0]) == {"id", "ns", "text"}


def test_a_blocking_step_gets_its_own_lessons_too(hall: Society, taught: dict) -> None:
    """A forked step sees ctx.lessons; another nick's lessons are not among them."""
    reply = wait_reply(hall, post(hall, "@forker", "anything")["id"])
    own = [g["id"] for g in reply["data"]["got"] if g["ns"] != GENERAL]
    assert own == taught["forker"]
    assert len(reply["data"]["got"]) == 3


def test_a_command_handler_reads_them_on_stdin(hall: Society, taught: dict) -> None:
    """The stdin JSON gains exactly one key, "lessons"; every other key is the message's."""
    ask = post(hall, "@shell", "shell, do it", data={"x": 1})
    reply = wait_reply(hall, ask["id"])
    received = json.loads((hall.root / "shell-stdin.json").read_text())
    stored = next(line for line in hall.lines() if line["id"] == ask["id"])
    assert set(received) - set(stored) == {"lessons"}
    assert {k: received[k] for k in ("id", "body", "data", "from")} == {
        k: stored[k] for k in ("id", "body", "data", "from")
    }
    handed = [lesson["id"] for lesson in received["lessons"]]
    assert set(taught["shell"]) <= set(handed) and len(handed) == 4
    assert reply["data"]["lessons"] == handed


def test_an_mcp_agent_prompt_starts_with_the_lessons_block(hall: Society, taught: dict) -> None:
    """The prompt's first lines are the lessons, each with its id; then the usual prompt."""
    ask = post(hall, "@agent", "agent, please")
    reply = wait_reply(hall, ask["id"], timeout=40)
    assert reply["from"] == "agent" and "agent did" in reply["body"]
    prompt = (hall.root / "agent-prompt.txt").read_text()
    assert prompt.startswith("Lessons from shared memory")
    assert set(taught["agent"]) <= set(lesson_block_ids(prompt))
    assert "You are @agent" in prompt


def test_a_lurker_without_an_index_still_answers_and_says_so(society: Society) -> None:
    """No index file: the wake goes on without lessons, and the log says why, once."""
    from tests.memory.helpers import add_member

    add_member(society.root, "stepper", handler="tests.memory.steps:told", timeout_s=20)
    society.start_hub()
    (lurker,) = start_lurkers(society, "stepper")
    for _ in range(2):
        reply = wait_reply(society, post(society, "@stepper", "hello")["id"])
        assert reply["data"]["got"] == [] and "lessons" not in reply["data"]
    log = wait_for(lambda: "waking without lessons" in lurker.output() and lurker.output(), 5)
    assert log.count("waking without lessons") == 1
    assert not Path(society.root / "state" / "memory.sqlite").exists()

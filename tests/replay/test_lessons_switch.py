"""BULLPEN_LESSONS=off (what `bullpen eval --lessons off` starts its society with): a real
lurker wakes without lessons, while the same nick, switched on, is handed its own."""

from __future__ import annotations

from pathlib import Path

from tests.memory.helpers import add_member, post, save, saved_id, wait_reply
from tests.support import Society, wait_for


def test_lessons_off_wakes_without_lessons(tmp_path: Path) -> None:
    society = Society(tmp_path / "home")
    add_member(society.root, "stepper", handler="tests.memory.steps:told", timeout_s=20)
    society.start_hub()
    society.start_lurker("librarian")
    lesson = saved_id(save(society, "/bullpen/lessons-learned/stepper", "check the puffin"))

    off = society.start_lurker("stepper", env={"BULLPEN_LESSONS": "off"})
    reply = wait_reply(society, post(society, "@stepper", "the puffin?")["id"])
    assert reply["data"]["got"] == [] and "lessons" not in reply["data"]
    off.stop()
    wait_for(lambda: not off.alive(), 20, "the lurker to stop")

    society.start_lurker("stepper", env={"BULLPEN_LESSONS": "on"})
    reply = wait_reply(society, post(society, "@stepper", "the puffin?")["id"])
    assert [lesson_["id"] for lesson_ in reply["data"]["got"]] == [lesson]
    assert reply["data"]["lessons"] == [lesson]

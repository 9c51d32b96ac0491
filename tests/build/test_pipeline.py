"""The foreman's build pipeline as a pure function of the thread: no state, no file."""

from __future__ import annotations

import sys
from typing import Any

from agents.build.config import BuildConfig
from agents.build.pipeline import Build
from agents.foreman.pipeline import KEY, Ask, Report, Run
from tests.build.helpers import ticket
from tests.expedition.sim import message

TRUSTED = frozenset({"avery", "foreman", "sandbox", "testdesigner", "py"})
SPEC = "/tmp/sandbox/tests/test_calc.py"


class _NoFiles:
    armed = False
    opened: list[str] = []  # noqa: RUF012 - the hook cannot be removed, so it is shared

    @classmethod
    def hook(cls, event: str, args: tuple[Any, ...]) -> None:
        if cls.armed and event == "open":
            cls.opened.append(str(args[0]))


sys.addaudithook(_NoFiles.hook)


class Thread:
    def __init__(self, text: str) -> None:
        self.messages = [
            message(
                1, "avery", "foreman", "ask", "build", data={"pipeline": "build", "ticket": text}
            )
        ]
        self.configured = Build()
        self.configured.config = BuildConfig()

    def wake(self) -> list[Ask | Report]:
        """One wake: a fresh pipeline and the long-lived one decide the same, opening nothing."""
        run = Run(self.messages, foreman="foreman", trusted=TRUSTED, now=0.0)
        _NoFiles.opened.clear()
        _NoFiles.armed = True
        try:
            again, fresh = self.configured.advance(run), Build().advance(run)
        finally:
            _NoFiles.armed = False
        assert _NoFiles.opened == []
        assert again == fresh
        for action in again:
            if action.key not in run.keys:
                to = action.to if isinstance(action, Ask) else "avery"
                kind = "ask" if isinstance(action, Ask) else "reply"
                data = {
                    **action.data,
                    KEY: action.key,
                    **({} if kind == "ask" else {"final": action.final}),
                }
                self.add("foreman", to, kind, action.body, data=data)
        return again

    def add(self, sender: str, to: str, type_: str, body: str, **fields: Any) -> Any:
        posted = message(len(self.messages) + 1, sender, to, type_, body, **fields)
        self.messages.append(posted)
        return posted

    def ask(self, key: str) -> Any:
        return next(m for m in self.messages if m.type == "ask" and (m.data or {}).get(KEY) == key)


def test_a_build_walks_its_steps_from_the_thread_alone() -> None:
    thread = Thread(ticket("/tmp/sandbox", SPEC, tiers="cheap,strong"))
    first = thread.wake()
    assert [a.key for a in first] == ["checked", "prepare"]
    assert thread.ask("prepare").to == "@sandbox"
    assert thread.wake() == [] or all(a.key in {"checked", "prepare"} for a in thread.wake())
    prepare = thread.ask("prepare")
    thread.add("sandbox", "foreman", "reply", "ok", in_reply_to=prepare.id,
               data={"build_dir": "/tmp/bullpen-build/c", "baseline": "abc"})  # fmt: skip
    assert [a.key for a in thread.wake() if a.key == "spec"] == ["spec"]
    spec = thread.ask("spec")
    assert spec.to == "@testdesigner" and spec.data["contract"].startswith("@testdesigner")
    thread.add("testdesigner", "foreman", "reply", "red", in_reply_to=spec.id,
               data={"passing": 0, "total": 2, "baseline": "abc"})  # fmt: skip
    due = next(a for a in thread.wake() if a.key == "grind")
    assert isinstance(due, Ask) and due.timeout_s == BuildConfig().grind_timeout_s + 120
    grind = thread.ask("grind")
    assert grind.to == "@py" and grind.data["tiers"] == ["cheap", "strong"]
    thread.add("py", "foreman", "reply", "iteration 1",  # an iteration: no answer to the ask
               data={"kind": "grind-iteration", "tier": "cheap", "iteration": 1})  # fmt: skip
    assert not any(a.key == "report" for a in thread.wake())
    thread.add("py", "foreman", "reply", "green", in_reply_to=grind.id, data={
        "green": True, "tier": "strong", "passing": 2, "total": 2, "clone": "/tmp/bullpen-build/grind-x",
        "iterations": {"cheap": 2, "strong": 1}, "baseline": "abc", "fence": "bwrap",
    })  # fmt: skip
    final = next(a for a in thread.wake() if a.key == "report")
    assert isinstance(final, Report) and final.final
    assert {k: final.data[k] for k in ("kind", "green", "tier", "passing", "total", "clone", "iterations")} == {
        "kind": "build-report", "green": True, "tier": "strong", "passing": 2, "total": 2,
        "clone": "/tmp/bullpen-build/grind-x", "iterations": {"cheap": 2, "strong": 1},
    }  # fmt: skip
    assert (
        "fence: bwrap" in final.body
        and "git --git-dir /tmp/bullpen-build/grind-x.git diff --stat abc HEAD" in final.body
    )
    assert thread.wake() == []  # the run is over


def test_a_failed_step_ends_the_run_with_its_flag() -> None:
    thread = Thread(ticket("/tmp/sandbox", SPEC))
    thread.wake()
    thread.add("sandbox", "foreman", "reply", "[sandbox FAILED — no]", in_reply_to=thread.ask("prepare").id,
               data={"failed": True, "reason": "the build dir has uncommitted changes"})  # fmt: skip
    final = next(a for a in thread.wake() if a.key == "report")
    assert final.body == "[PREPARE FAILED — the build dir has uncommitted changes]"
    assert final.data["kind"] == "build-report" and final.data["green"] is False

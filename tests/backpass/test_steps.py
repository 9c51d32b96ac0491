"""The step functions on their own: bounds, early failures, and traces that change mid-run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agents.backpass import steps
from agents.runtime.step import JudgmentRequest, StepContext
from room.errors import StepFailed
from room.message import MAX_DATA_BYTES, Message
from tests.backpass.helpers import START_TS, BackpassHome, FakeJudge, drive, git, local_script


def _ask(data: dict[str, Any]) -> Message:
    return Message.model_validate(
        {
            "seq": 2,
            "id": "m2",
            "ts": START_TS,
            "from": "foreman",
            "to": "@tracelister",
            "type": "ask",
            "body": "b",
            "data": data,
            "thread": "backpass-steps",
            "verified": True,
        }
    )


def _ctx(bp_home: BackpassHome, judge: FakeJudge | None = None) -> StepContext:
    async def read_thread(_: str, __: int = 0) -> list[Message]:
        return []

    return StepContext("t", bp_home.home, {}, judge or FakeJudge(), read_thread)


class TestList:
    def test_list_is_bounded_by_max_traces_and_fits_a_post(self, bp_home: BackpassHome) -> None:
        """Past max_traces the rest are deferred; the reply's data stays far under the room's limit."""
        long = "x" * 150
        for n in range(300):
            bp_home.trace(f"{long}/{n:04d}.md", f"trace {n}")
        params = bp_home.params(max_traces=250)
        reply = steps.list_traces(
            _ask({"run": params.model_dump(), "date": "2026-10-20"}), _ctx(bp_home)
        )
        assert reply.data is not None
        size = len(json.dumps(reply.data))
        assert size < MAX_DATA_BYTES // 2
        assert reply.data["pending"] == 300
        assert len(reply.data["traces"]) + reply.data["deferred"] == 300
        assert 0 < len(reply.data["traces"]) <= 250

    def test_broken_template_fails_before_any_model_call(self, bp_home: BackpassHome) -> None:
        """A synthesis template lacking a required marker fails step 1: no analysis is paid for."""
        (bp_home.root / "prompts" / "synthesis-prompt.md").write_text("Synthesise: {{ledger}}\n")
        bp_home.trace("a.md", "- It worked.\n")
        judge = FakeJudge()
        outcome = drive(bp_home.home, bp_home.params(), judge)
        assert outcome.data["ok"] is False
        assert "lacks {{public_bullets}}, {{private_bullets}}" in outcome.final.body
        assert judge.history == []

    def test_custom_templates_without_step_lines_run(self, bp_home: BackpassHome) -> None:
        """Templates that lack their step line still run; every prompt's first line names its step."""
        prompts = bp_home.root / "prompts"
        (prompts / "analysis-prompt.md").write_text("Read {{sesion}}:\n{{trace}}\n")
        (prompts / "synthesis-prompt.md").write_text(
            "<!-- ours -->\n{{ledger}}\n{{public_bullets}}\n{{private_bullets}}\n"
        )
        bp_home.trace("a.md", "- The rollback worked on the first try.\n")
        bp_home.trace("b.md", "- The rollback worked on the first try.\n")
        judge = FakeJudge()
        outcome = drive(bp_home.home, bp_home.params(), judge)
        assert outcome.data["ok"] is True, outcome.final.body
        assert {request.step for _, request in judge.history} == {"analysis", "synthesis"}
        for _, request in judge.history:
            assert request.prompt.splitlines()[0] == f"step: {request.step}"
        assert "{{sesion}} is not a placeholder" in outcome.final.body


class TestAnalyse:
    def test_overlong_trace_fails_with_the_fix(self, bp_home: BackpassHome) -> None:
        """A trace over max_trace_chars fails and names the setting."""
        path = bp_home.trace("big.md", "word " * 400)
        params = bp_home.params(max_trace_chars=1000)
        data = {
            "run": params.model_dump(),
            "date": "2026-10-20",
            "trace": {"n": 1, "path": str(path), "session": "big.md"},
        }
        with pytest.raises(StepFailed, match="max_trace_chars"):
            asyncio.run(steps.analyse(_ask(data), _ctx(bp_home)))


class TestSeatNamed:
    def test_analysis_and_synthesis_replies_name_the_seat_at_the_top(
        self, bp_home: BackpassHome
    ) -> None:
        """Like the expedition's, backpass replies carry `seat` and `fallback_used` in their data."""
        bp_home.trace(
            "a.md", "- The rollback worked on the first try.\n- Who owns the cron jobs?\n"
        )
        bp_home.trace("b.md", "- The rollback worked on the first try.\n")
        outcome = drive(bp_home.home, bp_home.params(), FakeJudge(fallback_for={"b.md"}))
        replies = {m.from_: m for m in outcome.thread.messages if m.type == "reply"}
        analyses = {m.data["session"]: m for m in outcome.thread.messages if m.from_ == "analyst"}
        seats = {s: (m.data["seat"], m.data["fallback_used"]) for s, m in analyses.items()}
        assert seats == {"a.md": ("fake", False), "b.md": ("fake-fallback", True)}
        synthesis = replies["synthesizer"].data
        assert (synthesis["seat"], synthesis["fallback_used"]) == ("fake", False)
        assert synthesis["provenance"]["seat"] == "fake"
        assert "(1 positive, 0 negative, 1 gap)" in analyses["a.md"].body


class TestChangedTrace:
    def test_trace_rewritten_after_analysis_is_a_failed_trace(self, bp_home: BackpassHome) -> None:
        """A trace rewritten between analysis and quote check fails, and is not marked done."""
        target = bp_home.trace("moving.md", "- The first attempt failed.\n")
        bp_home.trace("steady.md", "- The second attempt worked.\n")

        def script(step: str, request: JudgmentRequest) -> Any:
            answer = local_script(step, request)
            if request.payload.get("session") == "moving.md":
                Path(target).write_text("- Rewritten while the run went on.\n")
            return answer

        outcome = drive(bp_home.home, bp_home.params(), FakeJudge(script))
        assert outcome.data["ok"] is False
        (failed,) = outcome.data["failed_traces"]
        assert failed["session"] == "moving.md" and "rewritten or truncated" in failed["reason"]
        assert outcome.funnel["traces_analyzed"] == 1
        assert "moving.md" not in bp_home.state.read_text()

    def test_trace_appended_to_after_analysis_is_fine(self, bp_home: BackpassHome) -> None:
        """A trace that only grew is checked against what was analysed; the new part waits."""
        target = bp_home.trace("growing.md", "- The first attempt failed.\n")

        def script(step: str, request: JudgmentRequest) -> Any:
            answer = local_script(step, request)
            if step == "analysis":
                with open(target, "a") as handle:
                    handle.write("- Later the rollback worked.\n")
            return answer

        outcome = drive(bp_home.home, bp_home.params(), FakeJudge(script))
        assert outcome.data["ok"] is True and outcome.funnel["items_kept"] == 1
        again = drive(bp_home.home, bp_home.params())
        assert again.funnel["traces_pending"] == 1  # grown since: pending again


class TestStateFile:
    def test_step_one_refuses_a_hand_edited_state_file(self, bp_home: BackpassHome) -> None:
        """A state file that is not state lines fails step 1, naming it and the line; it is kept."""
        bp_home.trace("a.md", "- It worked.\n")
        bp_home.state.write_text("f" * 64 + "  /ok\ngarbage line here\n")
        judge = FakeJudge()
        outcome = drive(bp_home.home, bp_home.params(), judge)
        assert outcome.data["ok"] is False
        body = outcome.final.body
        assert "step 1 (list) failed" in body and str(bp_home.state) in body
        assert "line 2 is 'garbage line here'" in body
        assert judge.history == []  # refused before any analysis
        assert bp_home.state.read_text() == "f" * 64 + "  /ok\ngarbage line here\n"
        assert [p.name for p in bp_home.state.parent.iterdir()] == ["backpass.sha256"]

    def test_a_state_file_spoilt_mid_run_stops_before_any_branch(
        self, bp_home: BackpassHome
    ) -> None:
        """Edited into garbage during the analyses: step 5 fails before any branch, the file kept."""
        bp_home.trace("a.md", "- The rollback worked on the first try.\n")

        def script(step: str, request: JudgmentRequest) -> Any:
            if step == "analysis":
                bp_home.state.write_text("garbage line here\n")
            return local_script(step, request)

        outcome = drive(bp_home.home, bp_home.params(), FakeJudge(script))
        assert outcome.data["ok"] is False
        assert "step 5 (synthesis) failed" in outcome.final.body
        assert "line 1 is 'garbage line here'" in outcome.final.body
        assert "branches were written" not in outcome.final.body
        for repo in (bp_home.public, bp_home.private):
            assert git(repo, "branch", "--list", "memory-backpass/*") == ""
        assert bp_home.state.read_text() == "garbage line here\n"

    def test_a_state_write_failure_without_branches_names_no_empty_list(
        self, bp_home: BackpassHome
    ) -> None:
        """When no branch was needed and the state cannot be written, the message says so: no "()"."""
        bp_home.trace("a.md", "Nothing marked in this one.\n")
        (bp_home.state.parent / "backpass.sha256.lock").mkdir()  # the lock cannot be opened
        outcome = drive(bp_home.home, bp_home.params())
        assert outcome.data["ok"] is False
        body = outcome.final.body
        assert "()" not in body
        assert (
            f"no branch was needed, but the state file {bp_home.state} could not be updated" in body
        )


class TestTraceBound:
    def test_a_100_mb_one_line_trace_is_refused_from_stat_unread(
        self, bp_home: BackpassHome
    ) -> None:
        """A 100 MB trace on one line fails with the setting named, and is never read into memory."""
        import tracemalloc

        path = bp_home.trace("huge.jsonl", "")
        with path.open("wb") as handle:
            handle.truncate(100 * 1024 * 1024)  # sparse: its size is what stat reports
        params = bp_home.params()
        data = {
            "run": params.model_dump(),
            "date": "2026-10-20",
            "trace": {"n": 1, "path": str(path), "session": "huge.jsonl"},
        }
        tracemalloc.start()
        try:
            with pytest.raises(StepFailed, match=r"104857600 bytes on disk.*max_trace_chars"):
                asyncio.run(steps.analyse(_ask(data), _ctx(bp_home)))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 10 * 1024 * 1024

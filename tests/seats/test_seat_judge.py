"""The judge: retry once with the error, then the fallback, then fail loud — never invent."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
import structlog
from pydantic import BaseModel, Field

from agents.runtime.step import Judgment, JudgmentRequest, StepContext
from agents.seats import Seat, SeatRegistry, build_seats, make_judge
from agents.seats.answerschema import answer_schema
from room.errors import ConfigError, SeatError, StepFailed

if TYPE_CHECKING:
    from conftest import FakeModel


class Terms(BaseModel):
    terms: list[str] = Field(min_length=2)


GOOD = '{"terms": ["tide", "salt"]}'
REQUEST = JudgmentRequest(
    step="termgen", prompt="step: termgen\nGive terms as JSON.", payload={"k": 1}
)
# What a seat is handed: the request with the step's schema, which the judge attaches.
SENT = dataclasses.replace(REQUEST, answer_schema=answer_schema(Terms))


class ScriptedSeat(Seat):
    """A fake seat: answers (or raises) from a list, and keeps every request it got."""

    kind: ClassVar[str] = "fake"

    def __init__(self, name: str, answers: list[str | Exception], fallback: str | None = None):
        super().__init__(name, fallback=fallback)
        self.answers = list(answers)
        self.history: list[JudgmentRequest] = []

    async def complete(self, request: JudgmentRequest) -> str:
        self.history.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def judge(*seats: Seat, roles: dict[str, str] | None = None) -> Callable[..., Judgment[Terms]]:
    registry = SeatRegistry({seat.name: seat for seat in seats})
    judge_ = make_judge(registry, roles)

    def call(role: str = "termgen", request: JudgmentRequest = REQUEST) -> Judgment[Terms]:
        return asyncio.run(judge_(role, request, Terms))

    return call


class TestRetry:
    def test_a_valid_first_answer(self) -> None:
        """A valid answer is returned at once, naming the seat that gave it."""
        seat = ScriptedSeat("termgen", [GOOD])
        judgment = judge(seat)()
        assert judgment.answer == Terms(terms=["tide", "salt"])
        assert (judgment.seat, judgment.kind, judgment.role) == ("termgen", "fake", "termgen")
        assert (judgment.fallback_used, judgment.attempts) == (False, 1)
        assert seat.history == [SENT]

    def test_a_fenced_answer_is_accepted(self) -> None:
        """An answer in a ```json fence counts as valid on the first attempt."""
        judgment = judge(ScriptedSeat("termgen", [f"```json\n{GOOD}\n```"]))()
        assert judgment.attempts == 1

    def test_garbage_then_valid_succeeds_on_the_retry(self) -> None:
        """After an answer that is not JSON, one retry with the error appended succeeds."""
        seat = ScriptedSeat("termgen", ["Sure! Here are some terms: tide, salt.", GOOD])
        judgment = judge(seat)()
        assert judgment.attempts == 2
        assert judgment.seat == "termgen"
        assert not judgment.fallback_used
        retry = seat.history[1]
        assert retry.step == REQUEST.step and retry.payload == REQUEST.payload
        assert retry.prompt.startswith(REQUEST.prompt + "\n\nYour previous answer was rejected: ")
        assert "not valid JSON" in retry.prompt
        assert retry.prompt.endswith("Return ONLY valid JSON matching the schema.")

    def test_a_schema_mismatch_is_retried_with_the_field_named(self) -> None:
        """Valid JSON of the wrong shape is retried, and the retry says which field was wrong."""
        seat = ScriptedSeat("termgen", ['{"terms": ["only one"]}', GOOD])
        assert judge(seat)().attempts == 2
        assert "terms: List should have at least 2 items" in seat.history[1].prompt

    def test_garbage_twice_without_fallback_fails_loud(self) -> None:
        """Two bad answers and no fallback raise SeatError saying what was wrong; nothing is made up."""
        seat = ScriptedSeat("termgen", ["nope", '{"terms": "tide"}'])
        with pytest.raises(SeatError) as caught:
            judge(seat)()
        message = caught.value.message
        assert message.startswith(
            "termgen: no valid answer from seat 'termgen' (fake) after 2 attempts: "
            "the JSON does not match the Terms schema: terms:"
        )
        assert "(no fallback is set for [seats.termgen])" in message
        assert "FAILED" not in message  # the caller makes the flag
        assert len(seat.history) == 2
        assert caught.value.to_dict()["seats"] == ["termgen"]

    def test_a_seat_error_counts_as_an_attempt(self) -> None:
        """A transport failure is a failed attempt; the retry repeats the prompt unchanged."""
        seat = ScriptedSeat("termgen", [SeatError("x", reason="connection refused"), GOOD])
        judgment = judge(seat)()
        assert judgment.attempts == 2
        assert seat.history == [SENT, SENT]

    def test_other_exceptions_are_not_swallowed(self) -> None:
        """A bug in a seat (not a SeatError) propagates instead of being retried."""
        seat = ScriptedSeat("termgen", [RuntimeError("bug")])
        with pytest.raises(RuntimeError, match="bug"):
            judge(seat)()


NOT_JSON = "the answer is not valid JSON (not JSON: Expecting value at line 1 column 1)"


class TestFallback:
    def test_garbage_twice_then_the_fallback_answers(self) -> None:
        """After two bad answers the fallback seat is asked, and the judgment names it."""
        primary = ScriptedSeat("termgen", ["nope", "still nope"], fallback="big")
        big = ScriptedSeat("big", [GOOD])
        judgment = judge(primary, big)()
        assert judgment.seat == "big"
        assert judgment.kind == "fake"
        assert judgment.role == "termgen"
        assert judgment.fallback_used
        assert judgment.attempts == 3
        assert big.history == [SENT]  # the fallback gets the original prompt first
        assert judgment.provenance() == {
            "seat": "big",
            "seat_kind": "fake",
            "role": "termgen",
            "fallback_used": True,
            "attempts": 3,
            "misses": [
                f"termgen: {NOT_JSON}; it began 'nope'",
                f"termgen: {NOT_JSON}; it began 'still nope'",
            ],
        }

    def test_the_fallback_also_gets_one_retry(self) -> None:
        """The fallback seat gets a call and one retry with the error, like the first seat."""
        primary = ScriptedSeat("termgen", ["nope", "nope"], fallback="big")
        big = ScriptedSeat("big", ["{}", GOOD])
        judgment = judge(primary, big)()
        assert (judgment.seat, judgment.attempts) == ("big", 4)
        assert "Your previous answer was rejected" in big.history[1].prompt

    def test_every_seat_failing_reports_each(self) -> None:
        """When the fallback fails too, the error says what each seat did wrong."""
        primary = ScriptedSeat("termgen", ["nope", "nope"], fallback="big")
        big = ScriptedSeat(
            "big", [SeatError("x", reason="HTTP 500"), SeatError("x", reason="HTTP 503")]
        )
        with pytest.raises(SeatError) as caught:
            judge(primary, big)()
        message = caught.value.message
        assert message.startswith("termgen: no valid answer from seat 'termgen' (fake) after 2")
        assert message.endswith("; fallback 'big' (fake) after 2 attempts: HTTP 503")

    def test_a_chain_of_fallbacks_is_followed(self) -> None:
        """A fallback's own fallback is asked next, in order."""
        seats = [
            ScriptedSeat("termgen", ["a", "b"], fallback="mid"),
            ScriptedSeat("mid", ["c", "d"], fallback="big"),
            ScriptedSeat("big", [GOOD]),
        ]
        judgment = judge(*seats)()
        assert (judgment.seat, judgment.attempts, judgment.fallback_used) == ("big", 5, True)


class TestSeatChoice:
    def test_roles_send_a_role_to_another_table(self) -> None:
        """With roles={'termgen': 'big'}, the big seat answers for termgen."""
        unused = ScriptedSeat("termgen", [])
        big = ScriptedSeat("big", [GOOD])
        judgment = judge(unused, big, roles={"termgen": "big"})()
        assert (judgment.seat, judgment.role, judgment.fallback_used) == ("big", "termgen", False)
        assert unused.history == []

    def test_roles_naming_no_seat_are_refused_up_front(self) -> None:
        """A role sent to a seat that does not exist fails when the judge is made."""
        with pytest.raises(ConfigError, match="no such seat; the known seats are bulk"):
            make_judge(SeatRegistry({}), {"score": "nowhere"})

    def test_an_unknown_role_lists_the_known_seats(self) -> None:
        """Asking for a role with no seat fails with the list of seats."""
        with pytest.raises(SeatError, match="no seat named 'wizard'; the known seats are"):
            judge()(role="wizard")

    def test_a_role_without_a_table_answers_locally(self, local_answer: Any) -> None:
        """With no [seats.termgen] table, the built-in local seat answers."""
        local_answer("termgen", lambda payload: {"terms": ["from", "local", str(payload["k"])]})
        judgment = asyncio.run(make_judge(build_seats({}))("termgen", REQUEST, Terms))
        assert judgment.answer.terms == ["from", "local", "1"]
        assert (judgment.seat, judgment.kind, judgment.attempts) == ("termgen", "local", 1)

    def test_the_bulk_role_asks_for_the_analysis_step(self, local_answer: Any) -> None:
        """The role picks the seat; the request's step picks the local answer."""
        local_answer("analysis", lambda payload: {"terms": ["a", "b"]})
        request = JudgmentRequest(step="analysis", prompt="step: analysis\nx")
        judgment = asyncio.run(make_judge(build_seats({}))("bulk", request, Terms))
        assert (judgment.seat, judgment.role) == ("bulk", "bulk")


class TestLogging:
    def test_each_attempt_is_logged_without_prompt_or_answer(self) -> None:
        """Every attempt is one log event naming seat and outcome, never the prompt's text."""
        secret_prompt = "step: termgen\nconfidential-trace-text"
        request = JudgmentRequest(step="termgen", prompt=secret_prompt)
        seat = ScriptedSeat("termgen", ["not json confidential-answer", GOOD])
        with structlog.testing.capture_logs() as logs:
            judge(seat)(request=request)
        attempts = [entry for entry in logs if entry["event"] == "seat.attempt"]
        assert [(e["attempt"], e["ok"], e["seat"]) for e in attempts] == [
            (1, False, "termgen"),
            (2, True, "termgen"),
        ]
        rendered = json.dumps(logs, default=str)
        assert "confidential-trace-text" not in rendered


class TestWithFakeModel:
    def test_cmd_seat_garbage_then_valid(self, fake_model: FakeModel) -> None:
        """Through a real program: a bad answer, a self-contained retry prompt, a valid answer."""
        fake_model.script = {"termgen": ["Here you go: tide, salt", f"```json\n{GOOD}\n```"]}
        registry = build_seats({"termgen": fake_model.table()})
        judgment = asyncio.run(make_judge(registry)("termgen", REQUEST, Terms))
        assert (judgment.seat, judgment.kind, judgment.attempts) == ("termgen", "cmd", 2)
        first, second = fake_model.calls()
        assert first["prompt"] == REQUEST.prompt
        assert second["prompt"].startswith("step: termgen\n")
        assert second["prompt"].startswith(
            REQUEST.prompt + "\n\nYour previous answer was rejected: the answer is not valid JSON"
        )
        assert second["prompt"].endswith("Return ONLY valid JSON matching the schema.")

    def test_cmd_seat_failing_falls_back_to_local(
        self, fake_model: FakeModel, local_answer: Any
    ) -> None:
        """A program that keeps failing hands over to its fallback, and the reply says so."""
        fake_model.script = {"termgen": {"exit": 1, "stderr": "out of memory"}}
        local_answer("termgen", lambda payload: {"terms": ["safe", "answer"]})
        registry = build_seats(
            {"termgen": fake_model.table(fallback="offline"), "offline": {"kind": "local"}}
        )
        judgment = asyncio.run(make_judge(registry)("termgen", REQUEST, Terms))
        assert (judgment.seat, judgment.kind, judgment.fallback_used) == ("offline", "local", True)
        assert len(fake_model.calls()) == 2


class TestDocumentedFlag:
    def test_docs_show_the_flag_a_failing_step_posts(self, tmp_path: Path) -> None:
        """docs/seats.md's failure example has the form the termgen lurker really posts."""
        from agents.expedition.steps import gen_terms
        from agents.runtime.lurker import failure_body
        from tests.expedition.sim import ask, write_home

        registry = SeatRegistry(
            {
                "termgen": ScriptedSeat("termgen", ["no", "no"], fallback="big-remote"),
                "big-remote": ScriptedSeat("big-remote", ["nope", "nope"]),
            }
        )
        home = write_home(tmp_path / "home", tmp_path / "kb")

        async def no_thread(thread: str) -> list[Any]:
            return []

        ctx = StepContext("termgen", home, {}, make_judge(registry), no_thread)
        context = {"keyword_primary": "patience", "title": "Waiting", "blaze_phrases": []}
        with pytest.raises(StepFailed) as caught:
            asyncio.run(gen_terms(ask({"context": context}, to="termgen"), ctx))
        posted = failure_body("termgen", caught.value.message)

        docs = (Path(__file__).resolve().parents[2] / "docs" / "seats.md").read_text()
        example = "[termgen FAILED" + docs.split("[termgen FAILED", 1)[1].split("```", 1)[0]
        documented = " ".join(example.split())  # the example is wrapped; the flag is one line
        head = "[termgen FAILED — no valid termgen answer: termgen: no valid answer from seat "
        assert posted.startswith(head + "'termgen' (fake) after 2 attempts: ")
        assert documented.startswith(head + "'termgen' (openai) after 2 attempts: ")
        assert "; fallback 'big-remote' (fake) after 2 attempts: " in posted
        assert "; fallback 'big-remote' (openai) after 2 attempts: " in documented
        assert posted.endswith("]") and documented.endswith("]")

"""The local seat: answers from registered functions, offline and deterministic."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from agents.runtime.step import JudgmentRequest
from agents.seats import LocalSeat, local_answers, register_local, unregister_local
from room.errors import SeatError

Register = Callable[[str, Callable[[dict[str, Any]], dict[str, Any]]], None]


def request(step: str, **payload: Any) -> JudgmentRequest:
    return JudgmentRequest(step=step, prompt=f"step: {step}\nplease", payload=payload)


class TestLocalSeat:
    def test_answers_with_the_registered_function_as_json(self, local_answer: Register) -> None:
        """The step's function gets the payload and its dict comes back as JSON text."""
        local_answer("t-echo", lambda payload: {"echo": payload["word"], "n": 1})
        text = asyncio.run(LocalSeat("termgen").complete(request("t-echo", word="hé")))
        assert json.loads(text) == {"echo": "hé", "n": 1}

    def test_the_payload_is_a_copy(self, local_answer: Register) -> None:
        """An answer function that mutates its payload does not change the request."""
        local_answer("t-mutate", lambda payload: payload.setdefault("x", {"ok": True}) and {})
        req = request("t-mutate")
        asyncio.run(LocalSeat("score").complete(req))
        assert req.payload == {}

    def test_unknown_step_names_the_known_ones(self, local_answer: Register) -> None:
        """A step with no local answer fails naming the steps the seat knows."""
        local_answer("t-known", lambda payload: {})
        with pytest.raises(SeatError) as caught:
            asyncio.run(LocalSeat("score").complete(request("t-missing")))
        message = caught.value.message
        assert message.startswith("seat 'score' (local): the local seat has no answer for step")
        assert "'t-missing'" in message
        assert "t-known" in message

    def test_a_failing_function_is_a_seat_error(self, local_answer: Register) -> None:
        """An exception in the answer function becomes a SeatError naming the step."""

        def broken(payload: dict[str, Any]) -> dict[str, Any]:
            raise ValueError("no candidates in payload")

        local_answer("t-broken", broken)
        with pytest.raises(SeatError, match="'t-broken' failed: ValueError: no candidates"):
            asyncio.run(LocalSeat("score").complete(request("t-broken")))

    def test_an_unserializable_answer_is_a_seat_error(self, local_answer: Register) -> None:
        """An answer that cannot be JSON is refused rather than half-sent."""
        local_answer("t-set", lambda payload: {"s": {1, 2}})
        with pytest.raises(SeatError, match="not JSON-serializable"):
            asyncio.run(LocalSeat("score").complete(request("t-set")))


class TestRegistration:
    def test_registering_twice_needs_replace(self) -> None:
        """A second function for the same step is refused unless replace=True."""
        register_local("t-twice", lambda payload: {"v": 1})
        try:
            with pytest.raises(ValueError, match="already registered"):
                register_local("t-twice", lambda payload: {"v": 2})
            register_local("t-twice", lambda payload: {"v": 3}, replace=True)
            assert local_answers()["t-twice"]({}) == {"v": 3}
        finally:
            unregister_local("t-twice")
        assert "t-twice" not in local_answers()

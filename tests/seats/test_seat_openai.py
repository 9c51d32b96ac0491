"""The openai seat against tests/fakes/fake_openai.py, a real HTTP server on loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
import structlog
from pydantic import BaseModel

from agents.runtime.step import JudgmentRequest
from agents.seats import OpenAISeat, OpenAISeatConfig, build_seats, make_judge
from room.errors import SeatError

if TYPE_CHECKING:
    from conftest import FakeServer

    StartServer = Callable[..., FakeServer]

KEY = "sk-test-0123456789abcdef"
REQUEST = JudgmentRequest(step="score", prompt="step: score\nScore these rows.")


class Scores(BaseModel):
    scores: list[int]


def seat(base_url: str, **table: Any) -> OpenAISeat:
    config = {"kind": "openai", "base_url": base_url, "model": "qwen2.5-7b", **table}
    return OpenAISeat("score", OpenAISeatConfig.model_validate(config))


def complete(target: OpenAISeat, request: JudgmentRequest = REQUEST) -> str:
    return asyncio.run(target.complete(request))


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port that is bound but not listening: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


class TestSuccess:
    def test_content_is_the_completion(self, fake_openai: StartServer) -> None:
        """choices[0].message.content comes back as the completion text."""
        server = fake_openai({"score": ['{"scores": []}']})
        assert complete(seat(server.base_url)) == '{"scores": []}'

    def test_request_shape(self, fake_openai: StartServer, monkeypatch: pytest.MonkeyPatch) -> None:
        """The request carries model, one user message, stop, sampling, JSON mode and the key."""
        monkeypatch.setenv("SCORE_KEY", KEY)
        server = fake_openai({"score": "{}"})
        target = seat(
            server.base_url + "/",
            api_key_env="SCORE_KEY",
            stop=["</s>", "\n\n\n"],
            temperature=0.2,
            max_tokens=512,
            json_mode=True,
        )
        complete(target)
        [request] = server.requests()
        assert request["path"] == "/v1/chat/completions"
        assert request["headers"]["authorization"] == f"Bearer {KEY}"
        assert request["body"] == {
            "model": "qwen2.5-7b",
            "messages": [{"role": "user", "content": REQUEST.prompt}],
            "stream": False,
            "stop": ["</s>", "\n\n\n"],
            "temperature": 0.2,
            "max_tokens": 512,
            "response_format": {"type": "json_object"},
        }

    def test_no_key_no_extras(self, fake_openai: StartServer) -> None:
        """Without api_key_env, stop or json_mode, none of them are sent."""
        server = fake_openai({"score": "{}"})
        complete(seat(server.base_url, json_mode=False))
        [request] = server.requests()
        assert "authorization" not in request["headers"]
        assert set(request["body"]) == {"model", "messages", "stream"}

    def test_missing_key_variable_is_named(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A configured key variable missing from the environment is named; nothing is sent."""
        monkeypatch.delenv("SCORE_KEY", raising=False)
        with pytest.raises(
            SeatError, match=r"api_key_env names SCORE_KEY, but SCORE_KEY is not set"
        ):
            complete(seat("http://127.0.0.1:9/v1", api_key_env="SCORE_KEY"))


class TestJsonMode:
    def test_auto_falls_back_once_and_remembers(self, fake_openai: StartServer) -> None:
        """json_mode auto: a 400 about response_format is retried without it, and not sent again."""
        server = fake_openai({"score": ['{"n": 1}', '{"n": 2}']}, reject_response_format=True)
        target = seat(server.base_url)  # json_mode defaults to "auto"
        assert complete(target) == '{"n": 1}'
        assert complete(target) == '{"n": 2}'
        sent = [("response_format" in r["body"]) for r in server.requests()]
        assert sent == [True, False, False]
        assert target.remembered == "prompt"

    def test_auto_keeps_json_mode_when_it_works(self, fake_openai: StartServer) -> None:
        """json_mode auto against a server that accepts it keeps sending it."""
        server = fake_openai({"score": "{}"})
        target = seat(server.base_url)
        complete(target)
        complete(target)
        assert [("response_format" in r["body"]) for r in server.requests()] == [True, True]

    def test_forced_json_mode_refused_says_what_to_set(self, fake_openai: StartServer) -> None:
        """json_mode = true on a server without it fails naming the setting to change."""
        server = fake_openai({"score": "{}"}, reject_response_format=True)
        with pytest.raises(
            SeatError, match=r'refused response_format .*json_mode = "auto" or false'
        ):
            complete(seat(server.base_url, json_mode=True))
        assert len(server.requests()) == 1

    def test_an_unrelated_400_is_not_retried(self, fake_openai: StartServer) -> None:
        """A 400 about something else is an error, not a reason to drop JSON mode."""
        server = fake_openai({"score": [{"status": 400, "body": "context length exceeded"}]})
        target = seat(server.base_url)
        with pytest.raises(SeatError, match="HTTP 400: 'context length exceeded'"):
            complete(target)
        assert len(server.requests()) == 1
        assert target.remembered is None


class TestFailures:
    def test_malformed_body(self, fake_openai: StartServer) -> None:
        """A 200 whose body is not JSON is a SeatError quoting the body."""
        server = fake_openai({"score": [{"raw": "<html>gateway</html>"}]})
        with pytest.raises(SeatError, match=r"body is not JSON: '<html>gateway</html>'"):
            complete(seat(server.base_url))

    def test_missing_choices(self, fake_openai: StartServer) -> None:
        """A JSON body without choices[0].message.content is not mistaken for an answer."""
        server = fake_openai({"score": [{"response": {"object": "list", "data": []}}]})
        with pytest.raises(SeatError, match=r"not in the chat-completions shape"):
            complete(seat(server.base_url))

    def test_null_content(self, fake_openai: StartServer) -> None:
        """A message whose content is null (a tool call, a refusal) is refused too."""
        body = {"choices": [{"message": {"role": "assistant", "content": None}}]}
        server = fake_openai({"score": [{"response": body}]})
        with pytest.raises(SeatError, match=r"no choices\[0\].message.content"):
            complete(seat(server.base_url))

    def test_server_error(self, fake_openai: StartServer) -> None:
        """A 500 is a SeatError with the status and an excerpt of the body."""
        server = fake_openai({"score": [{"status": 500, "body": "CUDA out of memory " * 50}]})
        with pytest.raises(SeatError) as caught:
            complete(seat(server.base_url))
        message = caught.value.message
        assert message.startswith("seat 'score' (openai): ")
        assert "answered HTTP 500: 'CUDA out of memory" in message
        assert len(message) < 600  # an excerpt, not the whole body

    def test_unauthorized_masks_an_echoed_key(
        self, fake_openai: StartServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A 401 names the variable to check and never repeats the key, even when echoed."""
        monkeypatch.setenv("SCORE_KEY", KEY)
        body = {"error": {"message": f"Incorrect API key provided: {KEY}"}}
        server = fake_openai({"score": [{"status": 401, "body": body}]})
        with structlog.testing.capture_logs() as logs, pytest.raises(SeatError) as caught:
            complete(seat(server.base_url, api_key_env="SCORE_KEY"))
        assert "HTTP 401" in caught.value.message
        assert "check the key in $SCORE_KEY" in caught.value.message
        assert KEY not in json.dumps(caught.value.to_dict())
        assert KEY not in json.dumps(logs, default=str)

    def test_slow_server_times_out(self, fake_openai: StartServer) -> None:
        """A server slower than timeout_s is given up on at the deadline with a clear reason."""
        server = fake_openai({"score": [{"delay": 30, "content": "{}"}]})
        started = time.monotonic()
        with pytest.raises(SeatError, match=r"no answer from .* within 0.5 s"):
            complete(seat(server.base_url, timeout_s=0.5))
        assert time.monotonic() - started < 5

    def test_timeout_is_not_httpx_default(self, fake_openai: StartServer) -> None:
        """A model slower than httpx's 5 s default still answers within the seat's timeout."""
        server = fake_openai({"score": [{"delay": 5.5, "content": '{"slow": true}'}]})
        assert complete(seat(server.base_url, timeout_s=30)) == '{"slow": true}'

    def test_connection_refused(self, refusing_port: int) -> None:
        """Nothing listening is a SeatError that says to check the server and base_url."""
        base_url = f"http://127.0.0.1:{refusing_port}/v1"
        with pytest.raises(SeatError, match=r"cannot connect to .*is the model server running"):
            complete(seat(base_url))

    def test_credentials_in_base_url_are_not_shown(self, refusing_port: int) -> None:
        """A user:password in base_url never appears in an error."""
        base_url = f"http://user:hunter2secret@127.0.0.1:{refusing_port}/v1"
        with pytest.raises(SeatError) as caught:
            complete(seat(base_url))
        assert "hunter2secret" not in caught.value.message
        assert f"127.0.0.1:{refusing_port}" in caught.value.message


class TestThroughTheJudge:
    def test_garbage_then_fenced_json(self, fake_openai: StartServer) -> None:
        """Through the judge: prose, then a fenced answer on the retry, which carries the error."""

        server = fake_openai({"score": ["I think row 3.", '```json\n{"scores": [3]}\n```']})
        registry = build_seats(
            {"score": {"kind": "openai", "base_url": server.base_url, "model": "m"}}
        )
        judgment = asyncio.run(make_judge(registry)("score", REQUEST, Scores))
        assert judgment.answer.scores == [3]
        assert (judgment.seat, judgment.kind, judgment.attempts) == ("score", "openai", 2)
        retry = server.requests()[1]["body"]["messages"][0]["content"]
        assert retry.startswith("step: score\n")
        assert "Your previous answer was rejected: the answer is not valid JSON" in retry
        assert judgment.structured == "json_schema"
        assert len(judgment.misses) == 1 and "not valid JSON" in judgment.misses[0]
        assert judgment.provenance()["structured"] == "json_schema"

    def test_an_answer_cut_at_max_tokens_is_named_as_such(self, fake_openai: StartServer) -> None:
        """A broken answer the server stopped at max_tokens (finish_reason "length") is said
        to be cut off, in the miss, the retry prompt and the tally's gate; a broken answer
        the model finished is still plain "not valid JSON"."""
        from agents.seats.tally import gate_of

        cut = {
            "response": {
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": '{"scores": [1, 2, 3, 4'},
                        "finish_reason": "length",
                    }
                ]
            }
        }
        misses = []
        for broken in (cut, '{"scores": [1, 2'):
            server = fake_openai({"score": [broken, '{"scores": [5]}']})
            registry = build_seats(
                {"score": {"kind": "openai", "base_url": server.base_url, "model": "m"}}
            )
            judgment = asyncio.run(make_judge(registry)("score", REQUEST, Scores))
            assert judgment.answer.scores == [5] and judgment.attempts == 2
            misses += judgment.misses
            retry = server.requests()[1]["body"]["messages"][0]["content"]
            cut_said = "Your previous answer was rejected: the answer was cut off" in retry
            assert cut_said is (broken is cut)
        first, second = misses
        assert "cut off at its max_tokens bound" in first and "not valid JSON" in first
        assert "cut off" not in second and "not valid JSON" in second
        assert [gate_of(miss) for miss in misses] == ["answer within max_tokens", "answer is JSON"]


def judged(server: FakeServer, request: JudgmentRequest = REQUEST, **table: Any) -> Any:
    registry = build_seats(
        {"score": {"kind": "openai", "base_url": server.base_url, "model": "m", **table}}
    )
    return asyncio.run(make_judge(registry)("score", request, Scores))


class TestSchemaConstrained:
    def test_the_steps_schema_is_sent_strict(self, fake_openai: StartServer) -> None:
        """Through the judge, the step's schema goes out as a strict json_schema response_format,
        every object closed and fully required, and the judgment says so."""
        server = fake_openai({"score": '{"scores": [1, 2]}'})
        judgment = judged(server)
        assert judgment.structured == "json_schema" and judgment.misses == ()
        [sent] = server.requests()
        assert sent["body"]["response_format"] == {
            "type": "json_schema",
            "json_schema": {
                "name": "Scores",
                "schema": {
                    "type": "object",
                    "properties": {"scores": {"type": "array", "items": {"type": "integer"}}},
                    "required": ["scores"],
                    "additionalProperties": False,
                },
                "strict": True,
            },
        }

    def test_a_refused_schema_steps_down_to_json_object_and_is_remembered(
        self, fake_openai: StartServer
    ) -> None:
        """A server with JSON mode but no schemas: asked once more with json_object, which
        answers; the next call starts there, and the reply data names the mode."""
        server = fake_openai(
            {"score": ['{"scores": [1]}', '{"scores": [2]}']}, reject_response_format="json_schema"
        )
        first, second = (
            judged(server),
            judged(server),
        )  # two registries: the memory is the process's
        assert (first.answer.scores, second.answer.scores) == ([1], [2])
        assert first.structured == second.structured == "json_object"
        kinds = [r["body"]["response_format"]["type"] for r in server.requests()]
        assert kinds == ["json_schema", "json_object", "json_object"]
        assert first.attempts == 1  # a refused format is not a failed attempt

    def test_a_server_refusing_every_format_is_asked_with_the_prompt_alone(
        self, fake_openai: StartServer
    ) -> None:
        """json_schema refused, json_object refused, then the prompt alone: three requests, one
        answer, structured "prompt"."""
        server = fake_openai({"score": '{"scores": [3]}'}, reject_response_format=True)
        judgment = judged(server)
        assert judgment.structured == "prompt" and judgment.answer.scores == [3]
        formats = [r["body"].get("response_format", {}).get("type") for r in server.requests()]
        assert formats == ["json_schema", "json_object", None]

    def test_forced_json_mode_never_drops_to_the_prompt_alone(
        self, fake_openai: StartServer
    ) -> None:
        """json_mode = true: json_schema, then json_object, then a failure naming the setting."""
        server = fake_openai({"score": "{}"}, reject_response_format=True)
        with pytest.raises(SeatError, match=r'json_mode = "auto" or false'):
            judged(server, json_mode=True)
        assert len(server.requests()) == 4  # two formats, and the judge's one retry of both

    def test_max_tokens_is_the_steps_bound_lowered_to_the_tables(
        self, fake_openai: StartServer
    ) -> None:
        """The step's max_tokens is sent; the table's max_tokens caps it when smaller."""
        server = fake_openai({"score": "{}"})
        bounded = JudgmentRequest(step="score", prompt=REQUEST.prompt, max_tokens=300)
        complete(seat(server.base_url), bounded)
        complete(seat(server.base_url, max_tokens=100), bounded)
        complete(seat(server.base_url, max_tokens=1000), bounded)
        complete(seat(server.base_url))
        sent = [r["body"].get("max_tokens") for r in server.requests()]
        assert sent == [300, 100, 300, None]

    def test_each_request_is_one_log_line_saying_what_was_asked(
        self, fake_openai: StartServer
    ) -> None:
        """The refused mode is a `seat.structured_refused` line, the answered request a
        `seat.http` line with its mode and max_tokens; never the prompt or the answer."""
        server = fake_openai({"score": '{"scores": [7]}'}, reject_response_format="json_schema")
        request = JudgmentRequest(step="score", prompt="step: score\nsecret-prompt", max_tokens=90)
        with structlog.testing.capture_logs() as logs:
            judged(server, request)
        calls = [e for e in logs if e["event"] == "seat.http"]
        assert [(c["structured"], c["status"], c["max_tokens"]) for c in calls] == [
            ("json_object", 200, 90)
        ]
        refused = [e for e in logs if e["event"] == "seat.structured_refused"]
        assert [(r["mode"], r["status"]) for r in refused] == [("json_schema", 400)]
        assert "secret-prompt" not in str(logs) and "[7]" not in str(logs)

    def test_a_max_tokens_below_one_is_refused(self) -> None:
        with pytest.raises(ValueError, match="max_tokens must be at least 1"):
            JudgmentRequest(step="score", prompt=REQUEST.prompt, max_tokens=0)

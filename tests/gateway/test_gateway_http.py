"""The gateway as a real process in front of fake llama.cpp servers: routing, callers, policy."""

from __future__ import annotations

from collections.abc import Callable

from tests.gateway.helpers import FakeBackend, GatewayHome, sse_text
from tests.support import HTTP

StartFake = Callable[..., FakeBackend]


def test_longest_prefix_wins_and_unknown_model_lists_prefixes(
    gw: GatewayHome, fake: StartFake
) -> None:
    """`qwen2.5-coder` goes to the `qwen2.5-` backend, not the `qwen` one; an unknown model is a 404."""
    short, long = fake(answer="from short"), fake(answer="from long")
    gw.configure(
        {
            "short": {"base_url": short.base_url, "prefixes": ["qwen"]},
            "long": {"base_url": long.base_url, "prefixes": ["qwen2.5-"]},
            "cloud": {"base_url": long.base_url, "prefixes": ["cloud/"], "strip_prefix": True},
        }
    )
    token = gw.token("operator")
    gw.start()
    assert gw.chat(token, "qwen2.5-coder").json()["choices"][0]["message"]["content"] == "from long"
    assert gw.chat(token, "qwen3").json()["choices"][0]["message"]["content"] == "from short"
    assert gw.chat(token, "cloud/big").status_code == 200
    assert long.requests()[-1]["body"]["model"] == "big"  # the prefix stripped
    missing = gw.chat(token, "llama-3")
    assert missing.status_code == 404
    error = missing.json()["error"]
    assert error["type"] == "unknown_model"
    assert error["prefixes"] == ["cloud/", "qwen", "qwen2.5-"]
    assert "qwen2.5-" in error["message"]


def test_no_token_or_unknown_token_is_401(gw: GatewayHome, fake: StartFake) -> None:
    """A call without a caller token, or with one the gateway did not issue, never reaches a backend."""
    backend = fake()
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}})
    gw.token("operator")
    gw.start()
    for token in (None, "0" * 64):
        answer = gw.chat(token, "fake-model")
        assert answer.status_code == 401
        assert answer.json()["error"]["type"] == "unauthorized"
    assert backend.requests() == []
    assert gw.ledger() == []


def test_stop_strings_added_and_enforced_on_a_backend_that_ignores_them(
    gw: GatewayHome, fake: StartFake
) -> None:
    """The policy's stop string is sent, and the answer is cut at it when the backend ignores it."""
    backend = fake(answer="first part STOPHERE second part", honour_stop=False)
    gw.configure(
        {"local": {"base_url": backend.base_url, "prefixes": ["fake"]}},
        policy={"stop": ["STOPHERE"], "max_tokens": 100},
    )
    token = gw.token("operator")
    gw.start()
    answer = gw.chat(token, "fake-model", max_tokens=5000)
    assert answer.json()["choices"][0]["message"]["content"] == "first part "
    assert answer.headers["x-gateway-flags"] == "STOP_ENFORCED"
    sent = backend.requests()[-1]["body"]
    assert "STOPHERE" in sent["stop"] and sent["max_tokens"] == 100
    streamed = gw.chat(token, "fake-model", stream=True)
    text, chunks = sse_text(streamed)
    assert text == "first part "
    assert chunks[-1]["gateway_flags"] == ["STOP_ENFORCED"]
    assert [entry["flags"] for entry in gw.ledger()] == [["STOP_ENFORCED"]] * 2


def test_markers_cut_across_chunk_boundaries_and_flagged(gw: GatewayHome, fake: StartFake) -> None:
    """A ChatML marker the model leaks mid-stream, split over chunks, is cut and flagged TEMPLATE_LEAK."""
    leak = "The answer is 42.<|im_end|><|im_start|>user\nmore"
    backend = fake(answer=leak, chunk=3)  # `<|im_end|>` arrives in four pieces
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}})
    token = gw.token("operator")
    gw.start()
    streamed = gw.chat(token, "fake-model", stream=True)
    assert streamed.status_code == 200
    assert streamed.headers["content-type"].startswith("text/event-stream")
    text, chunks = sse_text(streamed)
    assert text == "The answer is 42."
    assert all("<|" not in (c["choices"][0]["delta"].get("content") or "") for c in chunks)
    assert chunks[-1]["gateway_flags"] == ["TEMPLATE_LEAK"]
    whole = gw.chat(token, "fake-model")
    assert whole.json()["choices"][0]["message"]["content"] == "The answer is 42."
    assert whole.headers["x-gateway-flags"] == "TEMPLATE_LEAK"
    assert gw.ledger()[-1]["flags"] == ["TEMPLATE_LEAK"]
    assert "TEMPLATE_LEAK" in str(httpx_health(gw))


def httpx_health(gw: GatewayHome) -> dict[str, object]:

    return HTTP.get(f"{gw.url}/health", timeout=5).json()


def test_clean_stream_passes_through_whole(gw: GatewayHome, fake: StartFake) -> None:
    """An answer without stop strings or markers streams through unchanged, chunk by chunk, with usage."""
    backend = fake(answer="a perfectly ordinary answer <| not a marker", chunk=2)
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}})
    token = gw.token("operator")
    gw.start()
    text, chunks = sse_text(gw.chat(token, "fake-model", stream=True))
    assert text == "a perfectly ordinary answer <| not a marker"
    assert len(chunks) > 10
    entry = gw.ledger()[-1]
    assert entry["flags"] == [] and entry["estimated"] is False and entry["tokens_in"] == 7


def test_failing_backend_is_retried_then_502_naming_it(gw: GatewayHome, fake: StartFake) -> None:
    """Two 503s are retried and the third try answers; a backend that always fails is a 502 naming it."""
    flaky, dead = fake(fail=2), fake(status=500)
    gw.configure(
        {
            "flaky": {"base_url": flaky.base_url, "prefixes": ["flaky"]},
            "dead": {"base_url": dead.base_url, "prefixes": ["dead"]},
            "gone": {"base_url": "http://127.0.0.1:9/v1", "prefixes": ["gone"]},
        },
        retries=2,
        backoff_s=0.01,
    )
    token = gw.token("operator")
    gw.start()
    assert gw.chat(token, "flaky-1").status_code == 200
    assert len(flaky.requests()) == 3
    for model, backend in (("dead-1", "dead"), ("gone-1", "gone")):
        failed = gw.chat(token, model)
        assert failed.status_code == 502
        assert failed.json()["error"]["backend"] == backend
        assert backend in failed.json()["error"]["message"]
    assert [e["status"] for e in gw.ledger()] == [200, 502, 502]


def test_slow_backend_runs_into_the_deadline(gw: GatewayHome, fake: StartFake) -> None:
    """A backend slower than the request's deadline gets a 502 in about the deadline, not a hang."""
    import time

    slow = fake(delay=5)
    gw.configure({"slow": {"base_url": slow.base_url, "prefixes": ["slow"]}}, deadline_s=0.5)
    token = gw.token("operator")
    gw.start()
    started = time.monotonic()
    answer = gw.chat(token, "slow-1")
    assert answer.status_code == 502
    assert "deadline" in answer.json()["error"]["message"]
    assert time.monotonic() - started < 3


def test_models_is_the_union(gw: GatewayHome, fake: StartFake) -> None:
    """GET /v1/models lists every backend's models, a stripped prefix put back."""
    one, two = fake(model="qwen-7b"), fake(model="big")
    gw.configure(
        {
            "one": {"base_url": one.base_url, "prefixes": ["qwen"]},
            "two": {"base_url": two.base_url, "prefixes": ["cloud/"], "strip_prefix": True},
        }
    )
    token = gw.token("operator")
    gw.start()

    listed = HTTP.get(
        f"{gw.url}/v1/models", headers={"Authorization": f"Bearer {token}"}, timeout=10
    ).json()
    assert {m["id"] for m in listed["data"]} == {"qwen-7b", "cloud/big"}

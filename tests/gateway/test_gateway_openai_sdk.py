"""The gateway as the official OpenAI Python SDK meets it (issue 24): streamed usage, n > 1
choices, the SDK's own retries, and model ids from /v1/models.

The client is the `openai` package with its defaults (two retries); the gateway is the real
process; the backends are fake llama.cpp servers.
"""

from __future__ import annotations

from collections.abc import Callable

import openai
import pytest

from tests.gateway.helpers import FakeBackend, GatewayHome

StartFake = Callable[..., FakeBackend]
HI = [{"role": "user", "content": "hi"}]


def _client(gw: GatewayHome, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=token, timeout=30)


def test_the_usage_chunk_reaches_the_sdk_and_the_ledger(gw: GatewayHome, fake: StartFake) -> None:
    """With include_usage, the backend's own usage chunk comes through and the ledger uses it."""
    backend = fake(answer="hello there, world", chunk=3)
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}})
    token = gw.token("operator")
    gw.start()
    stream = _client(gw, token).chat.completions.create(
        model="fake-model", messages=HI, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "hello there, world"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (7, 4)
    entry = gw.ledger()[-1]
    assert entry["estimated"] is False
    assert (entry["tokens_in"], entry["tokens_out"]) == (7, 4)


def test_every_streamed_choice_is_policed(gw: GatewayHome, fake: StartFake) -> None:
    """With n = 2 interleaved, a marker leaked in choice 1 is cut and flagged like one in choice 0."""
    leak = "second answer<|im_end|><|im_start|>user\nleaked turn"
    backend = fake(answers=["first answer, clean", leak], chunk=3)
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}})
    token = gw.token("operator")
    gw.start()
    stream = _client(gw, token).chat.completions.create(
        model="fake-model", messages=HI, stream=True, n=2
    )
    texts = ["", ""]
    finish: dict[int, str] = {}
    for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            if choice.finish_reason:
                finish[choice.index] = choice.finish_reason
    assert texts == ["first answer, clean", "second answer"]
    assert finish == {0: "stop", 1: "stop"}
    assert gw.ledger()[-1]["flags"] == ["TEMPLATE_LEAK"]


def test_the_sdk_does_not_retry_what_a_retry_cannot_mend(gw: GatewayHome, fake: StartFake) -> None:
    """A spent budget is one 429 line, a failing backend one 502 line and the gateway's own
    three tries: the SDK's two default retries are told not to run."""
    backend, dead = fake(), fake(status=500)
    gw.configure(
        {
            "local": {"base_url": backend.base_url, "prefixes": ["fake"]},
            "dead": {"base_url": dead.base_url, "prefixes": ["dead"]},
        },
        retries=2,
        backoff_s=0.01,
        callers={"operator": {"calls_per_day": 1}, "scorer": {"calls_per_day": 10}},
    )
    operator, scorer = gw.token("operator"), gw.token("scorer")
    gw.start()
    client = _client(gw, operator)
    assert client.max_retries == 2  # the SDK's default, which the gateway must not multiply
    client.chat.completions.create(model="fake-model", messages=HI)
    with pytest.raises(openai.RateLimitError) as spent:
        client.chat.completions.create(model="fake-model", messages=HI)
    assert [e["status"] for e in gw.ledger()] == [200, 429]  # one call, one refusal line
    assert len(backend.requests()) == 1
    headers = spent.value.response.headers
    assert headers["x-should-retry"] == "false"
    assert 0 < int(headers["retry-after"]) <= 86401
    with pytest.raises(openai.APIStatusError) as failed:
        _client(gw, scorer).chat.completions.create(model="dead-1", messages=HI)
    assert failed.value.status_code == 502
    assert len(dead.requests()) == 3  # the gateway's try and two retries, not 3 × 3
    assert [e["status"] for e in gw.ledger()] == [200, 429, 502]
    assert failed.value.response.headers["x-should-retry"] == "false"


def test_every_listed_model_id_routes_to_the_backend_that_listed_it(
    gw: GatewayHome, fake: StartFake
) -> None:
    """llama-server's path ids and vLLM's Org/Name ids from /v1/models are served, also after a
    restart; matching is case-sensitive."""
    llama = fake(model="models/SmolLM2-135M-Instruct.Q4_1.gguf", answer="from llama")
    vllm = fake(model="HuggingFaceTB/SmolLM2-135M-Instruct", answer="from vllm")
    cloud = fake(model="big", answer="from cloud")
    gw.configure(
        {
            "llama": {"base_url": llama.base_url, "prefixes": ["smol"]},
            "vllm": {"base_url": vllm.base_url, "prefixes": ["qwen"]},
            "cloud": {"base_url": cloud.base_url, "prefixes": ["cloud/"], "strip_prefix": True},
        }
    )
    token = gw.token("operator")
    proc = gw.start()
    client = _client(gw, token)
    ids = {model.id: model.owned_by for model in client.models.list()}
    assert ids == {
        "models/SmolLM2-135M-Instruct.Q4_1.gguf": "llama",
        "HuggingFaceTB/SmolLM2-135M-Instruct": "vllm",
        "cloud/big": "cloud",
    }

    def ask(model: str) -> str:
        answer = client.chat.completions.create(model=model, messages=HI)
        return answer.choices[0].message.content or ""

    for model, owner in ids.items():
        assert ask(model) == f"from {owner}"
    assert llama.requests()[-1]["body"]["model"] == "models/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert vllm.requests()[-1]["body"]["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert cloud.requests()[-1]["body"]["model"] == "big"
    proc.stop()
    gw.start()  # a client that listed the ids before the restart
    client = _client(gw, token)
    assert ask("HuggingFaceTB/SmolLM2-135M-Instruct") == "from vllm"
    with pytest.raises(openai.NotFoundError) as wrong_case:
        ask("huggingfacetb/smollm2-135m-instruct")
    assert "case-sensitive" in str(wrong_case.value)


def test_an_unreachable_backend_is_not_listed_as_its_bare_prefix(
    gw: GatewayHome, fake: StartFake
) -> None:
    """/v1/models lists the live backend's ids and nothing for one that does not answer: no
    `dead-` prefix the SDK's caller could pick and fail on."""
    from tests.support import free_port

    backend = fake()
    gw.configure(
        {
            "local": {"base_url": backend.base_url, "prefixes": ["fake"]},
            "dead": {"base_url": f"http://127.0.0.1:{free_port()}/v1", "prefixes": ["dead-"]},
        }
    )
    token = gw.token("operator")
    gw.start()
    ids = {model.id: model.owned_by for model in _client(gw, token).models.list()}
    assert ids == {"fake-model": "local"}


def test_a_cut_stream_ends_with_the_usage_it_counted_marked_estimated(
    gw: GatewayHome, fake: StartFake
) -> None:
    """A stream the gateway cuts at its deadline, asked with include_usage, gives the SDK a
    last chunk with the usage the ledger recorded, marked estimated; then the error."""
    endless = fake(forever=True)
    gw.configure({"local": {"base_url": endless.base_url, "prefixes": ["fake"]}}, deadline_s=1.0)
    token = gw.token("operator")
    gw.start()
    stream = _client(gw, token).chat.completions.create(
        model="fake-model", messages=HI, stream=True, stream_options={"include_usage": True}
    )
    chunks = []
    with pytest.raises(openai.APIError) as cut:
        for chunk in stream:
            chunks.append(chunk)
    assert "deadline" in str(cut.value)
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    entry = gw.ledger()[-1]
    assert entry["status"] == 504 and entry["estimated"] is True
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (
        entry["tokens_in"],
        entry["tokens_out"],
    )
    assert last.usage.completion_tokens > 0
    assert (last.usage.model_extra or {}).get("estimated") is True

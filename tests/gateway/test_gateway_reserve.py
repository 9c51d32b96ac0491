"""Budgets cannot fail open (issue 36): a call's worst case is held before it is sent.

The gateway is the real process, the backends fake llama.cpp servers (real programs), the
callers the official OpenAI SDK. Calls race the last of a budget, streamed, with n > 1 and
through the gateway's retries: what the ledger says they spent never passes the limit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import openai

from tests.gateway.helpers import FakeBackend, GatewayHome

StartFake = Callable[..., FakeBackend]
HI = [{"role": "user", "content": "hi"}]


def _client(gw: GatewayHome, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=token, timeout=30, max_retries=0)


def _race(
    gw: GatewayHome, token: str, calls: list[dict[str, Any]], headers: dict[str, str]
) -> list[str]:
    """Every call at once (released together); what each ended as: ok, 429 or an error."""
    outcomes: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(len(calls))

    def one(kwargs: dict[str, Any]) -> None:
        client = _client(gw, token)
        start.wait(10)
        try:
            if kwargs.get("stream"):
                for _ in client.chat.completions.create(
                    model="fake-model", messages=HI, extra_headers=headers, **kwargs
                ):
                    pass
            else:
                client.chat.completions.create(
                    model="fake-model", messages=HI, extra_headers=headers, **kwargs
                )
            outcome = "ok"
        except openai.RateLimitError:
            outcome = "429"
        except openai.APIError as exc:
            outcome = f"error {exc}"
        with lock:
            outcomes.append(outcome)

    workers = [threading.Thread(target=one, args=(kwargs,)) for kwargs in calls]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    return outcomes


def _spent(gw: GatewayHome, **match: Any) -> int:
    return sum(
        e["tokens_in"] + e["tokens_out"]
        for e in gw.ledger()
        if e["status"] == 200 and all(e.get(k) == v for k, v in match.items())
    )


def test_concurrent_calls_racing_the_last_of_a_budget_never_pass_it(
    gw: GatewayHome, fake: StartFake
) -> None:
    """Waves of 8 concurrent calls (plain, streamed, n = 2, some retried after a 503) against
    a caller's 900 tokens a day: the ledger's spend stays within 900, and calls were refused."""
    backend = fake(answer="word " * 200, delay=0.3, honour_max_tokens=True, fail=2)
    gw.configure(
        {"local": {"base_url": backend.base_url, "prefixes": ["fake"]}},
        retries=2,
        backoff_s=0.01,
        callers={"scorer": {"tokens_per_day": 900}},
    )
    token = gw.token("scorer")
    gw.start()
    kinds: list[dict[str, Any]] = [
        {"max_tokens": 60},
        {"max_tokens": 60, "stream": True, "stream_options": {"include_usage": True}},
        {"max_tokens": 40, "n": 2},
        {},  # no bound of its own: the gateway gives it the budget's room
    ]
    outcomes: list[str] = []
    for _ in range(4):
        outcomes += _race(gw, token, [kinds[i % 4] for i in range(8)], {})
    assert not [o for o in outcomes if o.startswith("error")], outcomes
    assert outcomes.count("ok") >= 4 and outcomes.count("429") >= 4, outcomes
    assert _spent(gw, caller="scorer") <= 900
    assert len(backend.requests()) >= outcomes.count("ok") + 2  # the retried 503s were sent
    refused = [e for e in gw.ledger() if e["status"] == 429]
    assert refused and all(e["flags"] == ["OVER_BUDGET"] for e in refused)
    unbounded = [r["body"] for r in backend.requests() if r["body"].get("n") is None]
    assert all(isinstance(b.get("max_tokens"), int) for b in unbounded)  # always bounded


def test_the_old_check_would_have_overspent(gw: GatewayHome, fake: StartFake) -> None:
    """A budget with room for one call's worst case admits one of eight concurrent calls,
    however little it has spent: the hold, not the spend so far, decides."""
    backend = fake(answer="word " * 200, delay=0.5, honour_max_tokens=True)
    gw.configure(
        {"local": {"base_url": backend.base_url, "prefixes": ["fake"]}},
        callers={"scorer": {"tokens_per_day": 250}},
    )
    token = gw.token("scorer")
    gw.start()
    outcomes = _race(gw, token, [{"max_tokens": 100}] * 8, {})
    assert sorted(outcomes) == ["429"] * 7 + ["ok"]
    assert _spent(gw) <= 250


def test_a_cost_budget_holds_the_price_and_refuses_an_unpriced_model(
    gw: GatewayHome, fake: StartFake
) -> None:
    """With a price, each line has its cost and the day's cost stays within cost_per_day; a
    model with no price is refused under a cost budget, naming [gateway.prices]."""
    backend = fake(answer="word " * 200, honour_max_tokens=True)
    other = fake(model="free-model")
    gw.configure(
        {
            "local": {"base_url": backend.base_url, "prefixes": ["fake"]},
            "free": {"base_url": other.base_url, "prefixes": ["free"]},
        },
        callers={"scorer": {"cost_per_day": 0.05}},
        prices={"fake": {"input_per_mtok": 100.0, "output_per_mtok": 300.0}},
    )
    token = gw.token("scorer")
    gw.start()
    outcomes = []
    for _ in range(6):
        outcomes += _race(gw, token, [{"max_tokens": 30}] * 3, {})
    assert "ok" in outcomes and "429" in outcomes
    lines = [e for e in gw.ledger() if e["status"] == 200]
    assert all(
        e["cost"] == round((e["tokens_in"] * 100 + e["tokens_out"] * 300) / 1e6, 9) for e in lines
    )
    assert sum(e["cost"] for e in lines) <= 0.05
    try:
        _client(gw, token).chat.completions.create(model="free-model", messages=HI)
        raise AssertionError("an unpriced model was admitted under a cost budget")
    except openai.RateLimitError as exc:
        assert "[gateway.prices]" in str(exc)
    assert other.requests() == []


def test_a_run_budget_stops_its_run_and_no_other(gw: GatewayHome, fake: StartFake) -> None:
    """[budgets] expedition = {tokens = 400}: calls naming thread exp-aaaa stop at its limit
    (429 naming run:exp-aaaa), exp-bbbb has its own, and a restart counts the run back in."""
    backend = fake(answer="word " * 200, honour_max_tokens=True)
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}})
    toml = gw.society.root / "society.toml"
    toml.write_text(toml.read_text() + "\n[budgets]\nexpedition = { tokens = 400 }\n")
    token = gw.token("scorer")
    proc = gw.start()
    run_a = {"x-bullpen-thread": "exp-aaaa", "x-bullpen-seq": "12"}
    outcomes = []
    for _ in range(3):
        outcomes += _race(gw, token, [{"max_tokens": 50}] * 3, run_a)
    assert "ok" in outcomes and "429" in outcomes
    assert _spent(gw, thread="exp-aaaa") <= 400
    assert {e["seq"] for e in gw.ledger() if e.get("thread") == "exp-aaaa"} == {12}
    client = _client(gw, token)
    client.chat.completions.create(  # another run of the same kind has its own budget
        model="fake-model",
        messages=HI,
        max_tokens=50,
        extra_headers={"x-bullpen-thread": "exp-bbbb"},
    )
    proc.stop()
    gw.start()
    try:
        _client(gw, token).chat.completions.create(
            model="fake-model", messages=HI, max_tokens=50, extra_headers=run_a
        )
        raise AssertionError("the spent run was admitted after a restart")
    except openai.RateLimitError as exc:
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error", body)
        assert error.get("budget") == "run:exp-aaaa:tokens", exc.body
        assert "exp-aaaa" in str(exc) and "[budgets]" in str(exc)


def test_a_call_with_no_bound_and_no_room_for_one_token_is_refused(
    gw: GatewayHome, fake: StartFake
) -> None:
    """A budget with room for the prompt's bound and not one token more refuses a call that
    sets no max_tokens (sent unbounded, it would have spent 257 tokens of 79)."""
    from agents.gateway.reserve import prompt_bound

    backend = fake(answer="word " * 200, honour_max_tokens=True)
    room = prompt_bound({"messages": HI})
    gw.configure(
        {"local": {"base_url": backend.base_url, "prefixes": ["fake"]}},
        callers={"scorer": {"tokens_per_day": room}},
    )
    token = gw.token("scorer")
    gw.start()
    try:
        _client(gw, token).chat.completions.create(model="fake-model", messages=HI)
        raise AssertionError("a call with no room for one token was sent")
    except openai.RateLimitError:
        pass
    assert backend.requests() == []
    assert _spent(gw) == 0

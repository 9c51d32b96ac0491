"""A run's own budget (`--budget`), as a seat sends it: `x-bullpen-budget` on each call.

It can only tighten `[budgets]`; the gateway writes it in each ledger line, so a restarted
gateway holds the run to it before any call names it again; a malformed one is a 400.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from tests.gateway.helpers import FakeBackend, GatewayHome
from tests.support import HTTP

StartFake = Callable[..., FakeBackend]


def call(gw: GatewayHome, token: str, thread: str, budget: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "x-bullpen-thread": thread}
    if budget is not None:
        headers["x-bullpen-budget"] = budget
    payload = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
    return HTTP.post(f"{gw.url}/v1/chat/completions", json=payload, headers=headers, timeout=30)


def test_a_runs_own_budget_tightens_budgets_and_survives_a_restart(
    gw: GatewayHome, fake: StartFake
) -> None:
    backend = fake()
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}})
    toml = gw.society.root / "society.toml"
    toml.write_text(toml.read_text() + "\n[budgets]\nexpedition = { calls = 3 }\n")
    token = gw.token("scorer")
    proc = gw.start()
    assert call(gw, token, "exp-00000001", "calls=1").status_code == 200
    refused = call(gw, token, "exp-00000001", "calls=1")
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["budget"] == "run:exp-00000001:calls" and error["limit"] == 1
    assert "--budget" in error["message"]
    # A seat that leaves the budget out, or names a higher one, gets no more.
    assert call(gw, token, "exp-00000001", None).status_code == 429
    assert call(gw, token, "exp-00000001", "calls=50").status_code == 429
    # Another run without one of its own has [budgets]' three calls.
    assert [call(gw, token, "exp-00000002", None).status_code for _ in range(4)] == [
        200, 200, 200, 429
    ]  # fmt: skip
    assert [e.get("run_budget") for e in gw.ledger()][:2] == [{"calls": 1}] * 2
    proc.stop()
    gw.start()  # the ledger says what the run was given: still spent, named by no header
    again = call(gw, token, "exp-00000001", None)
    assert again.status_code == 429 and again.json()["error"]["limit"] == 1
    assert len(backend.requests()) == 4


def test_a_malformed_run_budget_is_a_400_and_nothing_is_sent(
    gw: GatewayHome, fake: StartFake
) -> None:
    backend = fake()
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}})
    token = gw.token("scorer")
    gw.start()
    for bad in ("calls=-1", "tokens=many", "wishes=3", "calls=1,calls=2", "cost=inf"):
        answer = call(gw, token, "exp-00000003", bad)
        assert answer.status_code == 400, (bad, answer.text)
        assert "x-bullpen-budget" in answer.json()["error"]["message"]
    headers = {"Authorization": f"Bearer {token}", "x-bullpen-budget": "calls=1"}
    payload = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
    alone = HTTP.post(f"{gw.url}/v1/chat/completions", json=payload, headers=headers, timeout=30)
    assert alone.status_code == 400 and "x-bullpen-thread" in alone.text
    assert backend.requests() == []

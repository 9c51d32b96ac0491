"""Budgets fail closed, the ledger survives SIGKILL, and no token or key leaks anywhere."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

import httpx

from tests.gateway.helpers import FakeBackend, GatewayHome, sse_text
from tests.support import HTTP, run_cli, wait_for

StartFake = Callable[..., FakeBackend]


def test_caller_budget_exhausted_is_429_naming_it(gw: GatewayHome, fake: StartFake) -> None:
    """The third call of a caller allowed two a day is a 429 naming the budget, use and reset."""
    backend = fake()
    gw.configure(
        {"local": {"base_url": backend.base_url, "prefixes": ["fake"]}},
        callers={"scorer": {"calls_per_day": 2}},
    )
    scorer, other = gw.token("scorer"), gw.token("operator")
    gw.start()
    assert [gw.chat(scorer, "fake-model").status_code for _ in range(2)] == [200, 200]
    refused = gw.chat(scorer, "fake-model")
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["type"] == "budget"
    assert error["budget"] == "caller:scorer:calls_per_day"
    assert error["used"] == 2 and error["limit"] == 2
    assert error["resets_at"].endswith("T00:00:00Z")
    assert "scorer" in error["message"] and "resets" in error["message"]
    assert len(backend.requests()) == 2  # the refused call never reached the backend
    assert gw.chat(other, "fake-model").status_code == 200  # another caller has its own
    assert [e["status"] for e in gw.ledger()] == [200, 200, 429, 200]
    hook = HTTP.get(  # the budget hook: asked before a call, counting nothing
        f"{gw.url}/v1/budget",
        params={"model": "fake-model"},
        headers={"Authorization": f"Bearer {scorer}"},
        timeout=10,
    )
    assert hook.status_code == 429 and hook.json()["error"]["used"] == 2
    room = HTTP.get(
        f"{gw.url}/v1/budget",
        params={"model": "fake-model"},
        headers={"Authorization": f"Bearer {other}"},
        timeout=10,
    )
    assert room.json() == {"ok": True, "caller": "operator", "backend": "local"}
    assert len(gw.ledger()) == 4


def test_backend_token_budget_survives_a_restart(gw: GatewayHome, fake: StartFake) -> None:
    """A backend's tokens per day are counted back in from the ledger after a restart."""
    backend = fake(answer="x" * 400)  # 100 completion tokens + 7 prompt tokens a call
    gw.configure(
        {
            "local": {
                "base_url": backend.base_url,
                "prefixes": ["fake"],
                "budget": {"tokens_per_day": 300},
            }
        }
    )
    token = gw.token("operator")
    proc = gw.start()
    # Each call holds its worst case first: 81 tokens of prompt bound + max_tokens 100.
    assert gw.chat(token, "fake-model", max_tokens=100).status_code == 200
    assert gw.chat(token, "fake-model", max_tokens=100).status_code == 200  # 107 + 181 fits
    assert gw.chat(token, "fake-model", max_tokens=100).status_code == 429  # 214 + 181 not
    proc.stop()
    gw.start()
    again = gw.chat(token, "fake-model", max_tokens=100)
    assert again.status_code == 429
    assert again.json()["error"]["budget"] == "backend:local:tokens_per_day"


def test_in_flight_budget(gw: GatewayHome, fake: StartFake) -> None:
    """With one call in flight allowed, a second call while the first is slow is refused at once."""
    backend = fake(delay=1.5)
    gw.configure(
        {"local": {"base_url": backend.base_url, "prefixes": ["fake"]}},
        budget={"in_flight": 1},
    )
    token = gw.token("operator")
    gw.start()
    first: list[int] = []
    worker = threading.Thread(target=lambda: first.append(gw.chat(token, "fake-model").status_code))
    worker.start()
    wait_for(lambda: backend.requests(), 10, "the first call to reach the backend")
    second = gw.chat(token, "fake-model")
    worker.join(10)
    assert second.status_code == 429
    assert second.json()["error"]["budget"] == "caller:operator:in_flight"
    assert second.headers["x-should-retry"] == "true"  # a call ending makes room: worth a retry
    assert second.headers["retry-after"] == "1"
    assert first == [200]


def test_ledger_survives_sigkill_with_every_answered_call(gw: GatewayHome, fake: StartFake) -> None:
    """Calls answered before a SIGKILL mid-load, streamed or not, are all in the ledger."""
    backend = fake(delay=0.02, chunk=3)
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}})
    token = gw.token("operator")
    proc = gw.start()
    answered: list[str] = []
    lock = threading.Lock()

    def client(worker: int) -> None:
        with httpx.Client(timeout=10) as http:
            for i in range(200):
                model = f"fake-{worker}-{i}"
                body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
                body["stream"] = bool(i % 2)
                try:
                    answer = http.post(
                        f"{gw.url}/v1/chat/completions",
                        json=body,
                        headers={"Authorization": f"Bearer {token}"},
                    )
                except httpx.HTTPError:
                    return
                done = answer.status_code == 200 and (
                    not body["stream"] or answer.text.rstrip().endswith("data: [DONE]")
                )
                if body["stream"] and done:
                    done = sse_text(answer)[0] == "hello world"
                if done:
                    with lock:
                        answered.append(model)

    workers = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    wait_for(lambda: len(answered) >= 30, 30, "30 answered calls")
    proc.signal(signal.SIGKILL)
    for worker in workers:
        worker.join(15)
    logged = {entry["model"] for entry in gw.ledger() if entry["status"] == 200}
    missing = [model for model in answered if model not in logged]
    assert len(answered) >= 30
    assert missing == []


def test_no_token_or_key_in_logs_ledger_or_errors(gw: GatewayHome, fake: StartFake) -> None:
    """The backend's key and the caller's token appear in no log, ledger line or error body."""
    key = "sk-backend-key-" + "k" * 40
    good, echoing = fake(), fake(status=500, echo_auth=True)
    gw.configure(
        {
            "good": {"base_url": good.base_url, "prefixes": ["good"], "api_key_env": "FAKE_KEY"},
            "echo": {"base_url": echoing.base_url, "prefixes": ["echo"], "api_key_env": "FAKE_KEY"},
        },
        retries=0,
    )
    token = gw.token("operator")
    gw.proc = gw.society.spawn("gateway", "--log-level", "debug", "gateway", env={"FAKE_KEY": key})
    wait_for(gw.healthy, 20, "the gateway")
    bodies = [
        gw.chat(token, "good-1").text,
        gw.chat(token, "good-1", stream=True).text,
        gw.chat(token, "echo-1").text,
        gw.chat(token[:-4] + "0000", "good-1").text,
        gw.chat(token, "nothing").text,
    ]
    assert good.requests()[0]["headers"]["authorization"] == f"Bearer {key}"  # the key is used
    assert all(token not in str(r["headers"]) for r in good.requests())  # the token is not sent on
    assert "***" in bodies[2]  # the echoed key was masked
    usage = run_cli(gw.society.root, "gateway", "usage", "--by", "backend")
    assert usage.returncode == 0 and "good" in usage.stdout
    gw.proc.stop()
    places = [*bodies, gw.proc.output(), (gw.society.root / "gateway" / "ledger.jsonl").read_text()]
    places.append(usage.stdout + usage.stderr)
    for text in places:
        assert key not in text
        assert token not in text

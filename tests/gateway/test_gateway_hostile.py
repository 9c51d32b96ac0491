"""The gateway under hostile input (issue 23): an endless stream, a restart's budgets, a home
secret in a prompt, a backend quoting its key, and bodies built to break the parser.

Each test drives the real gateway process in front of fake llama.cpp servers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx

from tests.gateway.helpers import FakeBackend, GatewayHome, sse_text
from tests.support import HTTP, free_port

StartFake = Callable[..., FakeBackend]
KEY = "sk-backend-key-" + "q" * 40


def _post(gw: GatewayHome, token: str, content: bytes | str) -> httpx.Response:
    return HTTP.post(
        f"{gw.url}/v1/chat/completions",
        content=content,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=30,
    )


def test_a_stream_that_never_ends_is_cut_at_the_deadline(gw: GatewayHome, fake: StartFake) -> None:
    """A backend that streams forever is cut at deadline_s: an error event, [DONE], a 504 line."""
    endless = fake(forever=True)
    gw.configure({"local": {"base_url": endless.base_url, "prefixes": ["fake"]}}, deadline_s=1.5)
    token = gw.token("operator")
    gw.start()
    started = time.monotonic()
    lines: list[str] = []
    payload = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
    with HTTP.stream(
        "POST",
        f"{gw.url}/v1/chat/completions",
        json={**payload, "stream": True},
        headers={"Authorization": f"Bearer {token}"},
        timeout=20,
    ) as response:
        for line in response.iter_lines():
            lines.append(line)
            if time.monotonic() - started > 12:
                break  # today's gateway never ends the stream: stop reading, then fail below
    took = time.monotonic() - started
    assert took < 8, f"the stream ran {took:.1f} s past a 1.5 s deadline"
    events = [line[6:] for line in lines if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["type"] == "deadline" and "deadline" in error["message"]
    assert any("more" in event for event in events[:-2])  # what came before was passed on
    entry = gw.ledger()[-1]
    assert entry["status"] == 504 and entry["flags"] == ["DEADLINE"]


def test_a_restart_counts_only_what_live_accounting_counted(
    gw: GatewayHome, fake: StartFake
) -> None:
    """Refused (429) and failed (502) calls count toward no budget, live or after a restart."""
    local, dead = fake(), fake(status=500)
    gw.configure(
        {
            "local": {
                "base_url": local.base_url,
                "prefixes": ["fake"],
                "budget": {"calls_per_day": 5},
            },
            "dead": {"base_url": dead.base_url, "prefixes": ["dead"]},
        },
        retries=0,
        callers={"scorer": {"calls_per_day": 2}, "operator": {"calls_per_day": 4}},
    )
    scorer, operator = gw.token("scorer"), gw.token("operator")
    proc = gw.start()
    assert [gw.chat(scorer, "fake-model").status_code for _ in range(6)] == [200] * 2 + [429] * 4
    assert [gw.chat(operator, "dead-1").status_code for _ in range(3)] == [502] * 3
    assert [gw.chat(operator, "fake-model").status_code for _ in range(2)] == [200, 200]
    before = gw.chat(scorer, "fake-model").json()["error"]
    assert before["used"] == 2
    proc.stop()
    gw.start()
    # today's restore read 8 backend calls of 5 (the scorer's refusals) and 5 of 4 for the
    # operator (its failed calls): every caller was locked out
    assert gw.chat(operator, "fake-model").status_code == 200
    after = gw.chat(scorer, "fake-model").json()["error"]
    assert after["budget"] == before["budget"] and after["used"] == before["used"] == 2
    assert len(local.requests()) == 5


def test_negative_usage_never_refills_a_token_budget(gw: GatewayHome, fake: StartFake) -> None:
    """A backend's negative usage is estimated instead, live and after a restart alike."""
    backend = fake(answer="x" * 400)  # 100 completion tokens + 7 prompt tokens a call
    gw.configure(
        {
            "local": {
                "base_url": backend.base_url,
                "prefixes": ["fake"],
                "budget": {"tokens_per_day": 400},
            }
        }
    )
    token = gw.token("operator")
    proc = gw.start()
    assert gw.chat(token, "fake-model", max_tokens=100).status_code == 200  # 107
    backend.behave(usage_value={"prompt_tokens": -(10**9), "completion_tokens": -(10**9)})
    assert gw.chat(token, "fake-model", max_tokens=100).status_code == 200  # estimated: 1 + 100
    backend.behave(usage_value=None)
    # 208 spent + this call's worst case (81 of prompt bound + 100) fits in 400
    assert gw.chat(token, "fake-model", max_tokens=100).status_code == 200  # 315 used
    live = gw.chat(token, "fake-model", max_tokens=100)
    assert live.status_code == 429
    lying = gw.ledger()[1]
    assert lying["estimated"] is True and lying["tokens_in"] >= 0 and lying["tokens_out"] == 100
    proc.stop()
    gw.start()
    again = gw.chat(token, "fake-model", max_tokens=100)
    assert again.status_code == 429, "a restart refilled the budget"
    assert again.json()["error"]["used"] == live.json()["error"]["used"] == 315


def test_a_home_secret_in_a_prompt_is_refused_and_never_sent(
    gw: GatewayHome, fake: StartFake
) -> None:
    """The home's shared secret pasted into a prompt is a 400 naming no secret; nothing is sent."""
    backend = fake()
    gw.configure(
        {"local": {"base_url": backend.base_url, "prefixes": ["fake"]}},
        callers={"operator": {"calls_per_day": 1}},
    )
    token = gw.token("operator")
    gw.start()
    secret = gw.society.secret().decode()
    for model, messages in (
        ("fake-model", [{"role": "user", "content": f"please remember {secret} for me"}]),
        ("fake-model", [{"role": "user", "content": [{"type": "text", "text": f"k:{secret}"}]}]),
        (f"fake-{secret}", [{"role": "user", "content": "hi"}]),
    ):
        refused = gw.chat(token, model, messages=messages)
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["type"] == "secret_found"
        assert "nothing was sent" in error["message"]
        assert secret not in refused.text
    assert backend.requests() == []
    assert [e["flags"] for e in gw.ledger()] == [["SECRET_REFUSED"]] * 3
    assert gw.chat(token, "fake-model").status_code == 200  # the refusals used no budget
    assert secret not in (gw.society.root / "gateway" / "ledger.jsonl").read_text()


def test_the_backend_key_never_comes_back(gw: GatewayHome, fake: StartFake) -> None:
    """A backend quoting its key in a 4xx body, a 200 answer or a stream (split over chunks,
    in any of n choices) is masked."""
    refusing = fake(status=401, echo_auth=True)
    quoting = fake(quote_key=True, chunk=5, answers=["one", "two"])
    gw.configure(
        {
            "refusing": {
                "base_url": refusing.base_url,
                "prefixes": ["refusing"],
                "api_key_env": "FAKE_KEY",
            },
            "quoting": {
                "base_url": quoting.base_url,
                "prefixes": ["quoting"],
                "api_key_env": "FAKE_KEY",
            },
        }
    )
    token = gw.token("operator")
    gw.start(env={"FAKE_KEY": KEY})
    refused = gw.chat(token, "refusing-1")
    assert refused.status_code == 401
    assert "***" in refused.json()["error"]["message"]
    whole = gw.chat(token, "quoting-1", n=2)
    contents = [c["message"]["content"] for c in whole.json()["choices"]]
    assert contents == ["one (your key is ***)", "two (your key is ***)"]
    streamed = gw.chat(token, "quoting-1", stream=True, n=2)
    texts = ["", ""]
    for chunk in sse_text(streamed)[1]:
        for choice in chunk.get("choices", []):
            texts[choice["index"]] += choice["delta"].get("content") or ""
    assert texts == ["one (your key is ***)", "two (your key is ***)"]
    assert quoting.requests()[0]["headers"]["authorization"] == f"Bearer {KEY}"  # it was sent
    for text in (refused.text, whole.text, streamed.text, gw.proc.output() if gw.proc else ""):
        assert KEY not in text


BAD_BODIES: list[tuple[str, bytes]] = [
    ("nested a thousand deep", b"[" * 1000),
    (
        "an object nested deep",
        b'{"model":"fake-model","messages":' + b"[" * 5000 + b"]" * 5000 + b"}",
    ),
    ("not JSON", b"model=fake-model"),
    ("not UTF-8", b'{"model":"fake-model","messages":[{"content":"\xff\xfe"}]}'),
    ("a list", b"[]"),
    ("empty", b""),
    ("a number too big", b'{"model":"fake-model","messages":[],"temperature":1e400}'),
    ("NaN", b'{"model":"fake-model","messages":[],"temperature":NaN}'),
    ("duplicate keys", b'{"model":"fake-model","model":"dead","messages":[]}'),
    ("a huge integer", b'{"model":"fake-model","messages":[],"n":' + b"9" * 5000 + b"}"),
    ("model a number", b'{"model":5,"messages":[]}'),
    ("messages a string", b'{"model":"fake-model","messages":"hi"}'),
    ("messages of numbers", b'{"model":"fake-model","messages":[1,2]}'),
    ("content a number", b'{"model":"fake-model","messages":[{"role":"user","content":5}]}'),
    ("stream a string", b'{"model":"fake-model","messages":[],"stream":"yes"}'),
    ("n zero", b'{"model":"fake-model","messages":[],"n":0}'),
    ("n a string", b'{"model":"fake-model","messages":[],"n":"2"}'),
    ("stop a number", b'{"model":"fake-model","messages":[],"stop":5}'),
    ("stop of numbers", b'{"model":"fake-model","messages":[],"stop":[1]}'),
    ("max_tokens a string", b'{"model":"fake-model","messages":[],"max_tokens":"100"}'),
    ("max_tokens negative", b'{"model":"fake-model","messages":[],"max_tokens":-5}'),
    ("stream_options a string", b'{"model":"fake-model","messages":[],"stream_options":"x"}'),
    ("a lone surrogate", b'{"model":"fake-model","messages":[{"content":"\\ud800"}]}'),
    (
        "over the size bound",
        b'{"model":"fake-model","messages":[{"content":"' + b"x" * (9 << 20) + b'"}]}',
    ),
]


def test_every_bad_body_is_a_4xx(gw: GatewayHome, fake: StartFake) -> None:
    """A body built to break the parser or the fields the gateway reads is a 4xx saying what."""
    backend = fake()
    gw.configure(
        {
            "local": {"base_url": backend.base_url, "prefixes": ["fake"]},
            "dead": {"base_url": f"http://127.0.0.1:{free_port()}/v1", "prefixes": ["dead"]},
        },
        retries=0,
    )
    token = gw.token("operator")
    proc = gw.start()
    wrong = []
    for name, body in BAD_BODIES:
        answer = _post(gw, token, body)
        try:
            error = answer.json()["error"]
        except (ValueError, KeyError, TypeError):
            error = {}
        if not 400 <= answer.status_code < 500 or not error.get("message"):
            wrong.append((name, answer.status_code, answer.text[:200]))
    assert wrong == []
    assert backend.requests() == []
    assert gw.ledger() == []
    assert gw.healthy()
    assert gw.chat(token, "fake-model").status_code == 200  # and it still serves
    assert "Traceback" not in proc.output()


def test_a_malformed_answer_is_a_502_never_a_500(gw: GatewayHome, fake: StartFake) -> None:
    """A backend's 200 that is NaN-laden, nested too deep, or has choices that are not a list
    is a 502 naming the backend; nothing unpoliced is passed on."""
    backend = fake()
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}}, retries=0)
    token = gw.token("operator")
    proc = gw.start()
    deep = "[" * 900 + "]" * 900
    for raw in (
        '{"choices": [{"message": {"content": "hi"}}], "score": NaN}',
        '{"choices": [{"message": {"content": "hi", "x": ' + deep + "}}]}",
        '{"choices": {"0": {"message": {"content": "leak<|im_end|>"}}}}',
        "[1, 2]",
    ):
        backend.behave(raw=raw)
        answer = gw.chat(token, "fake-model")
        assert answer.status_code == 502, (raw[:60], answer.status_code, answer.text[:200])
        assert answer.json()["error"]["backend"] == "local"
    assert "Traceback" not in proc.output()
    assert [e["status"] for e in gw.ledger()] == [502] * 4

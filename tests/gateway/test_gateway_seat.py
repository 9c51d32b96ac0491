"""A seat with `via = "gateway"`: a real hub, gateway, lurker and fake llama.cpp server."""

from __future__ import annotations

from collections.abc import Callable

from tests.gateway.helpers import FakeBackend, GatewayHome
from tests.support import add_nick, set_seat
from tests.test_lurker import say, wait_reply

StartFake = Callable[..., FakeBackend]


def test_a_seat_via_the_gateway_over_budget_fails_flagged_without_a_direct_call(
    gw: GatewayHome, fake: StartFake
) -> None:
    """The first ask is answered through the gateway as the nick; over budget, the reply is a
    flagged FAILED naming the budget, and the direct fallback seat is never called."""
    backend = fake(answer='{"verdict": "through the gateway"}')
    direct = fake(answer='{"verdict": "DIRECT CALL"}')
    society = gw.society
    gw.configure(
        {"local": {"base_url": backend.base_url, "prefixes": ["fake"]}},
        callers={"asker": {"calls_per_day": 1}},
    )
    set_seat(
        society.root, "direct", f'kind = "openai"\nbase_url = "{direct.base_url}"\nmodel = "m"'
    )
    set_seat(
        society.root,
        "remote",
        'kind = "openai"\nvia = "gateway"\nmodel = "fake-model"\nfallback = "direct"',
    )
    add_nick(society.root, "asker", handler="tests.fakes.judging_step:judge_once", seat="remote")
    token = gw.token("asker")
    society.start_hub()
    gw.start()
    society.start_lurker("asker")
    first = wait_reply(society, say(society, "@asker", "is it so?")["id"], 60)
    assert first["body"] == "through the gateway", first
    sent = backend.requests()[0]
    assert "authorization" not in sent["headers"]  # the caller's token stays at the gateway
    assert gw.ledger()[0]["caller"] == "asker" and gw.ledger()[0]["status"] == 200
    second = wait_reply(society, say(society, "@asker", "and now?")["id"], 60)
    assert second["data"]["failed"] is True
    assert "FAILED" in second["body"]
    assert "HTTP 429" in second["body"] and "calls_per_day" in second["body"]
    assert "no fallback" in second["body"]
    assert direct.requests() == []  # never a fallback to a direct call
    assert len(backend.requests()) == 1
    assert [e["status"] for e in gw.ledger()] == [200, 429]  # asked once: a refusal is final
    assert token not in society.room.read_text()


def test_a_seat_via_the_gateway_without_a_gateway_section_says_so(
    gw: GatewayHome,
) -> None:
    """A via-gateway seat in a home without [gateway] fails with a reply saying what to add."""
    society = gw.society
    set_seat(society.root, "remote", 'kind = "openai"\nvia = "gateway"\nmodel = "fake-model"')
    add_nick(society.root, "asker", handler="tests.fakes.judging_step:judge_once", seat="remote")
    society.start_hub()
    society.start_lurker("asker")
    reply = wait_reply(society, say(society, "@asker", "is it so?")["id"], 60)
    assert reply["data"]["failed"] is True
    assert "configures no [gateway] section" in reply["body"]


def test_a_run_budget_stops_the_run_with_a_failed_line_naming_it(
    gw: GatewayHome, fake: StartFake
) -> None:
    """A seat's calls name the run and the ask (the ledger's thread and seq); with [budgets]
    expedition = {calls = 1}, the run's second ask fails loud naming its run budget, and a
    call for another run still goes through."""
    backend = fake(answer='{"verdict": "through the gateway"}')
    society = gw.society
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}})
    toml = society.root / "society.toml"
    toml.write_text(toml.read_text() + "\n[budgets]\nexpedition = { calls = 1 }\n")
    set_seat(society.root, "remote", 'kind = "openai"\nvia = "gateway"\nmodel = "fake-model"')
    add_nick(society.root, "asker", handler="tests.fakes.judging_step:judge_once", seat="remote")
    gw.token("asker")
    society.start_hub()
    gw.start()
    society.start_lurker("asker")
    ask = say(society, "@asker", "is it so?", thread="exp-0a0a0a0a")
    first = wait_reply(society, ask["id"], 60)
    assert first["body"] == "through the gateway", first
    entry = gw.ledger()[0]
    assert (entry["thread"], entry["seq"]) == ("exp-0a0a0a0a", ask["seq"])
    second = wait_reply(
        society, say(society, "@asker", "and now?", thread="exp-0a0a0a0a")["id"], 60
    )
    assert second["data"]["failed"] is True and "FAILED" in second["body"]
    assert "run exp-0a0a0a0a" in second["body"] and "[budgets]" in second["body"]
    other = wait_reply(
        society, say(society, "@asker", "elsewhere?", thread="exp-0b0b0b0b")["id"], 60
    )
    assert other["body"] == "through the gateway", other
    assert [e["status"] for e in gw.ledger()] == [200, 429, 200]

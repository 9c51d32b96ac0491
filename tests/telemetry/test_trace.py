"""`bullpen trace THREAD`: a recorded run as a trace, from the room and the ledger alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from room.traceids import run_span_id, step_span_id, trace_id
from tests.support import free_port, run_cli
from tests.telemetry.runs import Recorded, record_expedition
from tests.web.browser import session_client, wait_web

WEB_PORT: list[int] = []
PRICES = '[gateway.prices."fake"]\ninput_per_mtok = 100.0\noutput_per_mtok = 400.0\n'


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    WEB_PORT[:] = [free_port()]
    extra = f'[web]\nlisten = "127.0.0.1:{WEB_PORT[0]}"\n\n{PRICES}\n[budgets]\n'
    extra += "expedition = { tokens = 5000000 }\n"
    run = record_expedition(tmp_path_factory.mktemp("trace") / "home", extra)
    yield run
    run.stop()


def spans_of(run: Recorded) -> list[dict[str, Any]]:
    done = run_cli(run.society.root, "trace", run.thread, "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_tree_is_run_steps_then_calls_with_ids_from_the_room(recorded: Recorded) -> None:
    """One trace for the thread; the root is the run; a span per foreman ask with the ask's
    and the reply's seqs; each gateway call under the step whose ask it was made for."""
    spans = spans_of(recorded)
    thread = recorded.thread
    assert {s["trace_id"] for s in spans} == {trace_id(thread)}
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["span_id"] == run_span_id(thread) and root["name"] == "run expedition"
    lines = {m["seq"]: m for m in recorded.society.lines() if m.get("thread") == thread}
    steps = [s for s in spans if "bullpen.step.key" in s["attributes"]]
    assert len(steps) >= 6
    for step in steps:
        a = step["attributes"]
        ask = lines[a["bullpen.room.ask_seq"]]
        assert ask["from"] == "foreman" and ask["type"] == "ask"
        assert ask["to"] == f"@{a['bullpen.nick']}" and ask["data"]["key"] == a["bullpen.step.key"]
        assert step["span_id"] == step_span_id(thread, ask["seq"])
        assert step["parent_id"] == root["span_id"]
        if "bullpen.room.reply_seq" in a:
            reply = lines[a["bullpen.room.reply_seq"]]
            assert reply["in_reply_to"] == ask["id"] and reply["from"] == a["bullpen.nick"]
        assert a["bullpen.step.gates"]
    calls = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    ledger = [e for e in recorded.ledger() if e.get("thread") == thread]
    assert len(calls) == len(ledger) >= 3
    by_id = {s["span_id"]: s for s in steps}
    for call in calls:
        a = call["attributes"]
        parent = by_id[call["parent_id"]]  # every call hangs under a step
        assert a["bullpen.room.seq"] == parent["attributes"]["bullpen.room.ask_seq"]
        assert a["gen_ai.request.model"] == "fake-bridge" and call["kind"] == "client"
        assert a["gen_ai.response.finish_reasons"] == ["stop"]
        assert a["bullpen.seat"] in ("termgen", "score", "scotoma")
    assert sum(c["attributes"]["gen_ai.usage.input_tokens"] for c in calls) == sum(
        e["tokens_in"] for e in ledger
    )
    assert sum(c["attributes"]["gen_ai.usage.output_tokens"] for c in calls) == sum(
        e["tokens_out"] for e in ledger
    )
    nicks = {c["attributes"]["bullpen.nick"] for c in calls}
    assert nicks <= {"termgen", "scorer", "scotoma"} and len(nicks) == 3


def test_no_prompt_text_is_on_a_span_unless_content_is_captured(recorded: Recorded) -> None:
    """With capture_content off (the default), no span holds a prompt or an answer."""
    spans = spans_of(recorded)
    text = json.dumps(spans)
    asks = [m for m in recorded.society.lines() if m.get("thread") == recorded.thread]
    assert "input.value" not in text and "output.value" not in text
    for line in asks:
        body = str(line.get("body", ""))
        if len(body) > 40:
            assert body[:40] not in text


def test_a_thread_with_no_run_is_exit_2(recorded: Recorded) -> None:
    done = run_cli(recorded.society.root, "trace", "exp-00000000", timeout=60)
    assert done.returncode == 2 and "no run with the thread" in done.stderr


def test_the_text_tree_names_steps_and_tokens(recorded: Recorded, tmp_path: Path) -> None:
    """Without --json it prints the tree: the run, its steps, the calls with their tokens."""
    done = run_cli(recorded.society.root, "trace", recorded.thread, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("trace ") and lines[1].startswith("run expedition")
    assert any(line.startswith("  invoke_agent termgen") for line in lines)
    assert any(line.startswith("    chat fake-bridge") and " in / " in line for line in lines)


def test_gateway_usage_json_sums_the_run_with_its_cost(recorded: Recorded) -> None:
    """`bullpen gateway usage --by thread --json`: the run's row is the ledger's lines for it,
    costed at [gateway.prices]; --since tomorrow leaves nothing."""
    done = run_cli(recorded.society.root, "gateway", "usage", "--by", "thread", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = [r for r in json.loads(done.stdout) if r["thread"] == recorded.thread]
    ledger = [e for e in recorded.ledger() if e.get("thread") == recorded.thread]
    assert row["calls"] == len(ledger) >= 3
    assert row["tokens_in"] == sum(e["tokens_in"] for e in ledger)
    assert row["tokens_out"] == sum(e["tokens_out"] for e in ledger)
    expected = sum(e["tokens_in"] * 100 + e["tokens_out"] * 400 for e in ledger) / 1e6
    assert abs(row["cost"] - expected) < 1e-6
    later = run_cli(recorded.society.root, "gateway", "usage", "--json", "--since", "2999-01-01")
    assert json.loads(later.stdout) == []
    seats = run_cli(recorded.society.root, "gateway", "usage", "--by", "seat", "--json")
    assert {r["seat"] for r in json.loads(seats.stdout)} == {"termgen", "score", "scotoma"}


def test_the_cost_page_shows_runs_seats_nicks_days_and_the_run_budget(recorded: Recorded) -> None:
    """/cost (bullpen web, a real session): a row per run, seat, nick and day, a per-day chart
    drawn inline, and the run's budget use; /cost?thread=T is the run's own."""
    base = f"http://127.0.0.1:{WEB_PORT[0]}"
    wait_web(base, 60)
    ledger = [e for e in recorded.ledger() if e.get("thread") == recorded.thread]
    tokens_in = sum(e["tokens_in"] for e in ledger)
    with session_client(recorded.society.root) as client:
        page = client.get(f"{base}/cost").text
        own = client.get(f"{base}/cost", params={"thread": recorded.thread}).text
    for table in ("by-thread", "by-seat", "by-caller", "by-day"):
        assert f'id="{table}"' in page
    assert f'data-thread="{recorded.thread}"' in page and f"<td>{tokens_in}</td>" in page
    assert '<svg class="chart days"' in page and "<script" not in page.split("<main>")[1]
    assert f"run:{recorded.thread}:tokens" in own and 'id="by-thread"' not in own
    assert f"<td>{tokens_in}</td>" in own


def test_a_budget_near_its_limit_is_named(recorded: Recorded) -> None:
    """A caller budget with 10% left is listed by near_limit (the society page and `bullpen
    runs` show it); one with plenty left is not."""
    from agents.home import Home
    from agents.web.cost import near_limit

    spent = sum(
        e["tokens_in"] + e["tokens_out"] for e in recorded.ledger() if e["caller"] == "scorer"
    )
    toml = recorded.society.root / "society.toml"
    before = toml.read_text()
    try:
        limits = f"scorer = {{ tokens_per_day = {int(spent / 0.9)} }}\n"
        limits += "termgen = { tokens_per_day = 100000000 }\n"
        toml.write_text(before + "\n[gateway.callers]\n" + limits)
        near = near_limit(Home(recorded.society.root))
    finally:
        toml.write_text(before)
    assert [line.split(" ")[0] for line in near] == ["caller:scorer:tokens"], near
    assert "(90%)" in near[0] or "(89%)" in near[0] or "(91%)" in near[0]

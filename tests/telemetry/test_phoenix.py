"""An expedition's trace exported to Arize Phoenix and read back through Phoenix's own client.

One Phoenix for the module (its first start migrates a database); the run is a real one
(tests/telemetry/runs.py): `bullpen up`, the gateway, a fake model program behind it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from room.traceids import trace_id
from tests.support import run_cli, wait_for
from tests.telemetry.phoenix import Phoenix, start_phoenix
from tests.telemetry.runs import Recorded, record_expedition

pytestmark = pytest.mark.long  # one of the suite's slowest: run first (tests/conftest.py)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    server = start_phoenix(tmp_path_factory.mktemp("phoenix"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def recorded(phoenix: Phoenix, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    run = record_expedition(tmp_path_factory.mktemp("phoenix-run") / "home")
    yield run
    run.stop()


def read_back(phoenix: Phoenix, trace: str, count: int) -> list[dict[str, Any]]:
    from phoenix.client import Client

    client = Client(base_url=phoenix.url)
    found: list[Any] = []

    def arrived() -> bool:
        found[:] = client.spans.get_spans(
            project_identifier="default", trace_ids=[trace], limit=1000
        )
        return len(found) >= count

    wait_for(arrived, 60, f"Phoenix to hold the trace's {count} spans")
    return [dict(span) for span in found]


def test_phoenix_receives_the_run_and_gives_back_its_tree_and_tokens(
    phoenix: Phoenix, recorded: Recorded
) -> None:
    """`bullpen trace --otlp` sends the run to Phoenix; read back with phoenix.client, the
    tree is the same, the LLM spans' tokens add up to the ledger's, and no prompt is in it."""
    local = json.loads(
        run_cli(recorded.society.root, "trace", recorded.thread, "--json", timeout=60).stdout
    )
    assert phoenix.process.poll() is None, phoenix.log.read_text(errors="replace")[-3000:]
    done = run_cli(
        recorded.society.root, "trace", recorded.thread, "--otlp", phoenix.url, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert f"exported {len(local)} spans to {phoenix.url}/v1/traces" in done.stderr
    spans = read_back(phoenix, trace_id(recorded.thread), len(local))
    assert len(spans) == len(local)
    parents = {s["context"]["span_id"]: s.get("parent_id") for s in spans}
    assert parents == {s["span_id"]: s["parent_id"] for s in local}
    (root,) = [s for s in spans if not s.get("parent_id")]
    assert root["name"] == "run expedition"
    llm = [s for s in spans if s["span_kind"] == "LLM"]
    ledger = [e for e in recorded.ledger() if e.get("thread") == recorded.thread]
    assert len(llm) == len(ledger) >= 3
    attrs = [s["attributes"] for s in llm]
    assert sum(a["gen_ai.usage.input_tokens"] for a in attrs) == sum(e["tokens_in"] for e in ledger)
    assert sum(a["llm.token_count.completion"] for a in attrs) == sum(
        e["tokens_out"] for e in ledger
    )
    assert {a["gen_ai.operation.name"] for a in attrs} == {"chat"}
    stored = json.dumps(spans)
    assert "step: termgen" not in stored and "step: score" not in stored  # no prompt text
    assert "input.value" not in stored
    for span in spans:  # Phoenix shows a response model as the output, and only that
        output = span["attributes"].get("output.value")
        assert output is None or set(json.loads(output)) == {"model"}, output
    assert "Return ONLY" not in stored  # the prompts' closing instruction
    values = [str(v) for span in spans for v in span["attributes"].values()]
    answers = [v for v in values if v.lstrip().startswith(('{"terms"', '{"scores"', "step: "))]
    assert answers == [], answers  # nor a model's answer, nor a prompt, in any value


@pytest.fixture(scope="module")
def live(phoenix: Phoenix, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """A second run, to its end, with [telemetry] pointing at Phoenix: every process exports
    its own spans as it goes."""
    extra = f'[telemetry]\notlp_endpoint = "{phoenix.url}"\n'
    run = record_expedition(
        tmp_path_factory.mktemp("phoenix-live") / "home", extra, args=("--yes",)
    )
    yield run
    run.stop()


def test_a_live_run_is_one_trace_of_spans_from_the_foreman_lurkers_and_the_gateway(
    phoenix: Phoenix, live: Recorded
) -> None:
    """With [telemetry] on, the foreman (the run and each step), every lurker (its work on
    each ask) and the gateway (each model call) export their own spans, live, joined into one
    trace by the traceparent the ticket carries and the foreman copies into every ask: read
    back through phoenix.client it is one tree under the run's span, each span naming its
    room seq, and it already holds every span `bullpen trace` rebuilds afterwards."""
    from room.traceids import run_span_id, step_span_id

    thread = live.thread
    lines = [m for m in live.society.lines() if m.get("thread") == thread]
    (ticket,) = [m for m in lines if m["to"] == "@foreman" and m["type"] == "ask"]
    trace = ticket["data"]["traceparent"].split("-")[1]
    assert trace == trace_id(thread)
    asks = [m for m in lines if m["from"] == "foreman" and m["type"] == "ask"]
    ledger = [e for e in live.ledger() if e.get("thread") == thread]
    assert len(ledger) >= 3 and len(asks) >= 6
    # the run and the foreman's wake on its ticket, a step and a lurker's span per ask, a
    # call per ledger line
    expected = 2 + 2 * len(asks) + len(ledger)
    spans = read_back(phoenix, trace, expected)
    by_id = {s["context"]["span_id"]: s for s in spans}
    assert len(by_id) == len(spans) == expected
    assert {s["context"]["trace_id"] for s in spans} == {trace}
    (root,) = [s for s in spans if not s.get("parent_id")]
    assert root["context"]["span_id"] == run_span_id(thread) and root["name"] == "run expedition"
    assert all(s["parent_id"] in by_id for s in spans if s is not root)  # one tree
    made_by = {s["attributes"].get("bullpen.process") for s in spans}
    assert {"gateway", "lurker foreman"} <= made_by
    lurkers = {p for p in made_by if p and p.startswith("lurker ") and p != "lurker foreman"}
    assert {"lurker termgen", "lurker scorer", "lurker scotoma"} <= lurkers, made_by
    for span in spans:
        a = span["attributes"]
        assert isinstance(a.get("bullpen.room.seq"), int) and a["bullpen.room.seq"] > 0, span
        parent = by_id.get(span.get("parent_id") or "")
        if span["name"] == "handle foreman":  # its wake on the ticket, under the run
            assert parent is root and a["bullpen.room.seq"] == ticket["seq"]
        elif span["name"].startswith("handle "):  # a lurker's work, under the step it answered
            assert parent is not None
            assert parent["attributes"]["bullpen.room.ask_seq"] == a["bullpen.room.seq"]
            assert a["bullpen.process"] == "lurker " + span["name"].removeprefix("handle ")
        if span["span_kind"] == "LLM":  # a model call, under the step it was made for
            assert a["bullpen.process"] == "gateway"
            assert span["parent_id"] == step_span_id(thread, a["bullpen.room.seq"])
    assert sum(
        s["attributes"]["llm.token_count.prompt"] for s in spans if s["span_kind"] == "LLM"
    ) == sum(e["tokens_in"] for e in ledger)
    local = json.loads(run_cli(live.society.root, "trace", thread, "--json").stdout)
    assert {s["span_id"] for s in local} <= set(by_id)  # nothing left for `bullpen trace`
    assert {s["parent_id"] for s in local} <= {*by_id, None}
    done = run_cli(live.society.root, "trace", thread, "--otlp", phoenix.url, timeout=120)
    assert done.returncode == 0, done.stderr  # sent again: the same ids, no second trace
    again = read_back(phoenix, trace, len(spans))
    assert {s["context"]["span_id"] for s in again} == set(by_id)

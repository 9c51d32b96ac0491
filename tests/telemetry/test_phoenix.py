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
    """A second run, with [telemetry] pointing at Phoenix: the gateway exports as it goes."""
    extra = f'[telemetry]\notlp_endpoint = "{phoenix.url}"\n'
    run = record_expedition(tmp_path_factory.mktemp("phoenix-live") / "home", extra)
    yield run
    run.stop()


def test_the_gateway_exports_its_calls_live_and_bullpen_trace_joins_them(
    phoenix: Phoenix, live: Recorded
) -> None:
    """With [telemetry] on, each call's span reaches Phoenix during the run, under the span
    id of the step it was made for; `bullpen trace --otlp` then sends the steps and the run,
    and the live calls are part of the same tree: the same ids, no second trace."""
    from room.traceids import step_span_id

    ledger = [e for e in live.ledger() if e.get("thread") == live.thread]
    trace = trace_id(live.thread)
    calls = read_back(phoenix, trace, len(ledger))
    assert len(calls) == len(ledger) >= 3 and {s["span_kind"] for s in calls} == {"LLM"}
    parents = {s["parent_id"] for s in calls}
    assert parents == {step_span_id(live.thread, e["seq"]) for e in ledger}
    assert sum(s["attributes"]["llm.token_count.prompt"] for s in calls) == sum(
        e["tokens_in"] for e in ledger
    )
    local = json.loads(run_cli(live.society.root, "trace", live.thread, "--json").stdout)
    done = run_cli(live.society.root, "trace", live.thread, "--otlp", phoenix.url, timeout=120)
    assert done.returncode == 0, done.stderr
    spans = read_back(phoenix, trace, len(local))
    assert sorted(s["context"]["span_id"] for s in spans) == sorted(s["span_id"] for s in local)
    ids = {s["context"]["span_id"] for s in spans}
    assert all(s.get("parent_id") in ids for s in spans if s.get("parent_id"))

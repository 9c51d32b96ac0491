"""`bullpen trace THREAD`: a recorded run as a trace, from the room and the ledger alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.telemetry.ids import run_span_id, step_span_id, trace_id
from tests.support import run_cli
from tests.telemetry.runs import Recorded, record_expedition


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    run = record_expedition(tmp_path_factory.mktemp("trace") / "home")
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

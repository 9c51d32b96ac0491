"""A build's trace exported live: the grinder's spans as it grinds, and one trace across a
foreman restart (issue 36). The same society as tests/build/test_run.py (its `house`),
each test restarting the lurker it needs with export on, to an OTLP sink, and back after."""

from __future__ import annotations

import asyncio
import json
import secrets

from tests.build.helpers import PY_SPEC, ticket
from tests.build.test_run import House, _final_of, house  # noqa: F401 - the fixture
from tests.support import run_cli, wait_for


def test_a_live_build_exports_its_grind_iterations_from_the_grinder(house: House) -> None:  # noqa: F811
    """With export on in the grinder's process, each iteration and its fenced test run leave
    the grinder as spans as it announces them: in the trace the ticket's traceparent names,
    under the grind's step, with the ids `bullpen trace` gives them (issue 36)."""
    from room.traceids import step_span_id, trace_id
    from tests.telemetry.sink import OtlpSink

    sink = OtlpSink()
    society = house.society
    house.procs["py"].stop()
    house.procs["py"] = society.start_lurker("py", env={"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url})
    try:
        folder = house.campaign("pylive", {"tests/test_calc.py": PY_SPEC})
        done = house.build(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="pyfix"))
        assert done.returncode == 0, done.stdout + done.stderr
        lines = house.thread_of(done)
        thread = lines[0]["thread"]
        (grind,) = [m for m in lines if m["type"] == "ask" and m["to"] == "@py"]
        assert grind["data"]["traceparent"] == lines[0]["data"]["traceparent"]
        names = {"grind iteration 1", "fenced test run", "handle py"}
        wait_for(lambda: names <= {s["name"] for s in sink.held()}, 30, "the grinder's spans")
    finally:
        house.procs["py"].stop()  # its queue is sent as it stops
        house.procs["py"] = society.start_lurker("py")
        sink.close()
    spans = {s["name"]: s for s in sink.held()}
    assert {s["attributes"]["bullpen.process"] for s in sink.held()} == {"lurker py"}
    assert {s["trace_id"] for s in sink.held()} == {trace_id(thread)}
    step = step_span_id(thread, grind["seq"])
    iteration, test_run = spans["grind iteration 1"], spans["fenced test run"]
    assert iteration["parent_id"] == step and spans["handle py"]["parent_id"] == step
    assert test_run["parent_id"] == iteration["span_id"]
    announced = {m["seq"]: m for m in lines}[iteration["attributes"]["bullpen.room.seq"]]
    assert announced["data"]["kind"] == "grind-iteration" and announced["from"] == "py"
    assert test_run["attributes"]["bullpen.test.passing"] == 2
    traced = json.loads(run_cli(society.root, "trace", thread, "--json", timeout=60).stdout)
    rebuilt = {s["name"]: s["span_id"] for s in traced}
    assert rebuilt["grind iteration 1"] == iteration["span_id"]
    assert rebuilt["fenced test run"] == test_run["span_id"]


def test_a_runs_trace_survives_a_foreman_restart(house: House) -> None:  # noqa: F811
    """The foreman exports live and is restarted while the grinder grinds: the new process,
    with nothing but the thread, goes on exporting into the same trace (the context is in the
    room), so the run is one tree: every step under the run's span it ends with."""
    from agents.runticket import ticket_context
    from room.traceids import run_span_id, step_span_id, trace_id
    from tests.telemetry.sink import OtlpSink

    sink = OtlpSink()
    society = house.society
    exporting = {"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url}
    house.procs["foreman"].stop()
    house.procs["foreman"] = society.start_lurker("foreman", env=exporting)
    try:
        folder = house.campaign("restarttrace", {"tests/test_calc.py": PY_SPEC})
        text = ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="slowfix")
        thread = f"build-test-{secrets.token_hex(4)}"

        async def say() -> None:
            home = society.home
            data = {"pipeline": "build", "ticket": text, **ticket_context(thread)}
            async with home.client(home.society.operator) as client:
                await client.say("@foreman", "build", type="ask", data=data, thread=thread)

        asyncio.run(say())
        wait_for(
            lambda: any(m["type"] == "ask" and m["to"] == "@py" for m in house.thread(thread)),
            60,
            "the grind ask",
        )
        house.procs["foreman"].stop()  # what it holds is sent as it stops
        before = {s["span_id"] for s in sink.held()}
        house.procs["foreman"] = society.start_lurker("foreman", env=exporting)
        final = wait_for(lambda: _final_of(house.thread(thread)), 60, "the report")
        assert final["data"]["green"]
        root = run_span_id(thread)
        wait_for(lambda: root in {s["span_id"] for s in sink.held()}, 30, "the run's span")
    finally:
        house.procs["foreman"].stop()
        house.procs["foreman"] = society.start_lurker("foreman")
        sink.close()
    spans = [s for s in sink.held() if s["attributes"].get("bullpen.thread") == thread]
    assert {s["trace_id"] for s in spans} == {trace_id(thread)}
    asks = [m for m in house.thread(thread) if m["from"] == "foreman" and m["type"] == "ask"]
    steps = [s for s in spans if s["name"].startswith("invoke_agent ")]
    # every step, under the id its ask names: the new process sends the steps the old one
    # sent again (it remembers nothing), with the same ids, which a receiver keeps as one
    assert {s["span_id"] for s in steps} == {step_span_id(thread, m["seq"]) for m in asks}
    assert all(s["parent_id"] == root for s in steps)
    grind = step_span_id(thread, next(m["seq"] for m in asks if m["to"] == "@py"))
    assert grind not in before  # answered after the restart, by the new process
    assert any(s["span_id"] in before for s in steps)  # and the old one's are there too
    (run,) = [s for s in spans if s["span_id"] == root]
    assert run["parent_id"] is None and run["attributes"]["bullpen.run.state"] == "done"

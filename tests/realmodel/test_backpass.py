"""A backpass over two short traces, its bulk and synthesis seats SmolLM2 through the gateway.

Each observation the model returns must quote its trace verbatim; what it
made up is dropped and counted in the funnel, never written to memory. The
run either ends with its funnel report or says which trace failed and why.
Every call is one ledger line with the server's usage, asked with the
step's schema and max_tokens, and the room audits.
"""

from __future__ import annotations

import time

import pytest

from agents.backpass.prompts import ANALYSIS_TOKENS, SYNTHESIS_TOKENS
from tests.gateway.helpers import GatewayHome
from tests.realmodel.helpers import audit, gather, through_the_gateway
from tests.realmodel.server import LlamaServer
from tests.support import BACKPASS_LURKERS, run_cli, start_up

# A loaded 2-core machine makes a 135M model slow: each run has its own deadlines inside.
pytestmark = pytest.mark.timeout(900)

ROLES = ("bulk", "synthesis")
NICKS = ("analyst", "synthesizer")
TRACES = {
    "deploy.md": (
        "# Session 2026-10-17\n\n"
        "The deploy failed twice because the migration ran before the new code.\n"
        "We moved the migration into its own step and the deploy worked after the retry.\n"
    ),
    "tests.md": (
        "# Session 2026-10-18\n\n"
        "The test suite was slow, so we ran one file at a time.\n"
        "A flaky test waited on a sleep; waiting on the condition fixed it.\n"
    ),
}


@pytest.mark.long
def test_a_backpass_on_smollm2_over_two_traces(demo_gw: GatewayHome, llama: LlamaServer) -> None:
    society = demo_gw.society
    traces = society.root / "traces"
    for old in traces.rglob("*"):
        if old.is_file():
            old.unlink()
    for name, text in TRACES.items():
        (traces / name).write_text(text)
    through_the_gateway(demo_gw, llama, ROLES, NICKS)
    before = llama.metrics()
    started = time.monotonic()
    up = start_up(society, nicks=BACKPASS_LURKERS)
    done = run_cli(society.root, "backpass", "--wait-timeout", "600", timeout=660)
    elapsed = time.monotonic() - started
    out = done.stdout + done.stderr
    print(f"backpass on SmolLM2: exit {done.returncode} in {elapsed:.0f} s\n{out[-4000:]}")
    analyses = [m for m in society.lines() if m["from"] == "analyst" and m.get("in_reply_to")]
    assert len(analyses) == len(TRACES), analyses
    for reply in analyses:
        data = reply["data"] or {}
        if data.get("failed"):
            assert "FAILED" in reply["body"], reply
        else:
            assert data["provenance"]["seat"] == "bulk", data
            assert data["provenance"]["structured"] == "json_schema", data
    if done.returncode == 0:
        assert "analysed" in done.stdout, out
    else:
        assert "FAILED" in out, out
    evidence = gather(demo_gw, llama, NICKS, before)
    evidence.assert_honest(
        {
            "analysis": {ANALYSIS_TOKENS},
            "synthesis": {SYNTHESIS_TOKENS},
        }
    )
    up.stop()
    audit(society.root)

"""One theme of the expedition campaign (tests/expedition/campaign.py) with SmolLM2-135M judging.

The campaign's own knowledge base and theme, the real pipeline and steps (the
in-memory room of tests/expedition/sim.py), and the `real` seat: termgen,
score and scotoma all ask llama-server through a home's gateway. Whether a
135M model finds the deep cut is not the test; that the run says what
happened is: a Dig Report whose every file the index lists, and which says
whether the deep cut is among its deep cuts, or a `[STEP_n FAILED — reason]`
naming what went wrong; each judgment names the seat and how it was held;
every request is one or two calls in the ledger with the server's own usage.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from agents.seats.judge import ATTEMPTS_PER_SEAT
from tests.expedition import campaign
from tests.gateway.helpers import GatewayHome
from tests.realmodel.helpers import real_seat
from tests.realmodel.server import LlamaServer

pytestmark = pytest.mark.timeout(600)

# One score batch of five rows and four to scotoma: the prompts stay small, the run short.
SETTINGS = {"batch_size": 5, "max_candidates": 5, "top_for_scotoma": 4}
STEP_NICKS = ("termgen", "scorer", "scotoma")


def test_an_expedition_theme_on_smollm2_says_what_happened(
    gw: GatewayHome, llama: LlamaServer, tmp_path: Path
) -> None:
    real = real_seat(gw, "real", (campaign.CALLER,), llama=llama)
    theme = next(t for t in campaign.THEMES if t.keyword == "patience")
    kb = campaign.write_kb(tmp_path / "kb")
    before = llama.metrics()
    started = time.monotonic()
    try:
        judge = campaign.seat_judge(gw.society.root, "real")
        sim, report = campaign.dig_sim(tmp_path / "home", kb, theme, judge, settings=SETTINGS)
    finally:
        real.stop()
    cuts, outcome = campaign.report_cuts(report)
    found = "found" if theme.deep_file in cuts else "missed"
    print(f"{theme.keyword} on SmolLM2 in {time.monotonic() - started:.0f} s: {found}, {outcome}")
    assert sim.requests, "no step asked the model"
    if outcome == "dig report":  # the report's files are the index's: nothing made up
        indexed = (kb / "corpus_index.md").read_text()
        listed = report.data["deep_cuts"] + report.data["direct_hits"]  # type: ignore[index]
        for item in listed:
            assert f"| {item['file'].removeprefix('Corpus/')} |" in indexed, item
    else:  # ended before a report: which step, and why, in the operator's words
        failed = re.fullmatch(r"\[STEP_(\d) FAILED — (.+)\]", outcome)
        assert failed and failed.group(2).strip(), outcome
        flagged = [m for m in sim.messages if (m.data or {}).get("failed")]
        assert flagged and flagged[-1].data["reason"], flagged  # type: ignore[index]
    judgments: list[dict[str, Any]] = []
    for reply in sim.messages:
        if reply.type != "reply" or reply.from_ not in STEP_NICKS or not reply.data:
            continue
        if reply.data.get("failed"):
            continue
        judgments += reply.data.get("judgments") or [reply.data["judgment"]]
    for judgment in judgments:  # each answer names the seat that gave it, held to the schema
        assert judgment["seat"] == "real" and judgment["seat_kind"] == "openai", judgment
        assert judgment["structured"] == "json_schema", judgment
    ledger = gw.ledger()
    assert len(sim.requests) <= len(ledger) <= ATTEMPTS_PER_SEAT * len(sim.requests), (
        len(sim.requests),
        ledger,
    )
    for entry in ledger:
        assert entry["caller"] == campaign.CALLER and entry["status"] == 200, entry
        assert entry["estimated"] is False and entry["tokens_out"] > 0, entry
    assert sum(e["tokens_out"] for e in ledger) == (
        llama.metrics()["tokens_predicted_total"] - before.get("tokens_predicted_total", 0)
    )

"""One fix-existing-code campaign (bench/fixexisting.py) with SmolLM2-135M as its code seat.

The bench's own campaign: a git repository of real code with one planted bug,
the grind behind the real fence and real pytest, the `real` seat through the
gateway with a 300-token cap, so its turn is the focused one (agents/build/focus.py):
the function the failing test calls, answered as a code block that ends at its
closing fence; an answer cut at the cap is refused, and the run says so.
A 135M model rarely fixes it; what must hold either way is that the
run says what happened: green only when the spec really passes in the clone,
else red with the reason (the seat's problem or the spec's count); every call
a ledger line with the server's own usage, as many as the judgment's attempts;
the judgment names the seat; the operator's build dir is never touched.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.seats.judge import ATTEMPTS_PER_SEAT
from bench import fixexisting
from tests.build.helpers import set_build
from tests.gateway.helpers import GatewayHome
from tests.realmodel.helpers import real_seat
from tests.realmodel.server import LlamaServer

pytestmark = [pytest.mark.timeout(600), pytest.mark.long]

# The seat's cap, and so the answer's budget: under FOCUS_TOKENS, so the turn is focused (one
# function and its test, ~150 tokens in; a code block out): two calls, seconds each.
ANSWER_TOKENS = 300


def test_a_fix_existing_campaign_on_smollm2_says_what_happened(
    gw: GatewayHome, llama: LlamaServer, tmp_path: Path
) -> None:
    society = gw.society
    builds = tmp_path / "builds"
    builds.mkdir()
    set_build(society.root, root=str(builds), alias=str(tmp_path / "sandbox"))
    real = real_seat(gw, "real", (fixexisting.NICK,), llama=llama, max_tokens=ANSWER_TOKENS)
    config = fixexisting.build_config(builds, tmp_path / "sandbox", "real")
    config = config.model_copy(update={"max_iterations": 1})
    folder = fixexisting.campaign(builds, "value", "real")
    planted = (folder / "inventory.py").read_text()
    before = llama.metrics()
    started = time.monotonic()
    try:
        outcome = asyncio.run(fixexisting.one(society, config, folder, "real"))
    finally:
        real.stop()
    print(f"fix-existing on SmolLM2 in {time.monotonic() - started:.0f} s: {outcome}")
    assert outcome["iterations"] == 1, outcome  # the grind asked the seat once, and said so
    (turn,) = outcome["turns"]
    ledger = gw.ledger()
    if turn.get("judgment"):  # an answer in shape: the judgment names its seat and attempts
        assert outcome["seats"] == ["real"], outcome
        assert turn["judgment"]["seat_kind"] == "openai", turn
        assert turn["judgment"]["structured"] == "prompt", turn  # a code block was asked
        assert len(ledger) == turn["judgment"]["attempts"], (ledger, turn)
    else:  # no answer in shape: every attempt was a call, and the reason names the seat
        assert len(ledger) == ATTEMPTS_PER_SEAT, ledger
        assert turn["problem"].startswith(
            "code seat real: code: no valid answer from seat 'real'"
        ), turn
    for entry in ledger:
        assert entry["caller"] == fixexisting.NICK and entry["status"] == 200, entry
        assert entry["estimated"] is False and 0 < entry["tokens_out"] <= ANSWER_TOKENS, entry
    cut = [entry["tokens_out"] >= ANSWER_TOKENS for entry in ledger]  # a cut answer is refused
    if turn.get("judgment"):  # the answer taken was whole; each cut before it is a named miss
        assert not cut[-1], (ledger, turn)
        misses = " ".join(turn["judgment"].get("misses", []))
        assert misses.count("cut off at its max_tokens") == sum(cut), (ledger, turn)
    elif cut[-1]:  # the last answer was cut: the reason says so
        assert "cut off at its max_tokens" in turn["problem"], turn
    assert sum(e["tokens_out"] for e in ledger) == (
        llama.metrics()["tokens_predicted_total"] - before.get("tokens_predicted_total", 0)
    )
    if outcome["green"]:  # a claim of green is checked against the real spec
        spec = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
            cwd=outcome["clone"], capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert spec.returncode == 0, spec.stdout
    else:  # red, with why: the seat's problem, or the spec's own count
        assert fixexisting.why_red(outcome), outcome
        passing, total = map(int, outcome["passing"].split("/"))
        assert passing < total, outcome
        assert turn["total"] == total and turn["passing"] == passing, turn
    assert (folder / "inventory.py").read_text() == planted  # the build dir keeps its bug

"""An expedition whose three judged steps are SmolLM2-135M: seat → gateway → llama-server.

A 135M model held to each step's JSON schema answers in shape; whether what
it says passes the steps' own gates (ten to twelve terms, six sharing no
word with the keyword; every id of a batch scored once) is the real test.
The run ends in one of two honest ways: its Dig Report, whose every file is
one the knowledge base lists, or a loud `[STEP_n FAILED — …]` naming what
the model missed, with nothing made up in its place. Either way every call
is one ledger line carrying the server's own usage, asked with the step's
schema and its max_tokens, and the room audits.
"""

from __future__ import annotations

import re
import time

import pytest

from agents.expedition.prompts import (
    SCORE_TOKENS_BASE,
    SCORE_TOKENS_PER_ROW,
    SCOTOMA_TOKENS_BASE,
    SCOTOMA_TOKENS_PER_CUT,
    TERMS_TOKENS,
)
from agents.expedition.scotoma import MAX_DEEP_CUTS
from tests.gateway.helpers import GatewayHome
from tests.realmodel.helpers import audit, gather, set_section, through_the_gateway
from tests.realmodel.server import LlamaServer
from tests.support import EXPEDITION_LURKERS, run_cli, start_up

# A loaded 2-core machine makes a 135M model slow: each run has its own deadlines inside.
pytestmark = pytest.mark.timeout(900)

ROLES = ("termgen", "score", "scotoma")
NICKS = ("termgen", "scorer", "scotoma")
BATCH = 5  # one score batch of five rows, then the top four to scotoma: small prompts
TOP = 4


@pytest.mark.long
def test_an_expedition_on_smollm2_reaches_its_report_or_fails_loud(
    demo_gw: GatewayHome, llama: LlamaServer
) -> None:
    society = demo_gw.society
    through_the_gateway(demo_gw, llama, ROLES, NICKS)
    set_section(
        society.root, "expedition", batch_size=BATCH, max_candidates=BATCH, top_for_scotoma=TOP
    )
    before = llama.metrics()
    started = time.monotonic()
    up = start_up(society, nicks=EXPEDITION_LURKERS)
    done = run_cli(
        society.root,
        "expedition",
        "--title",
        "Waiting Is Part of the Work",
        "--keyword",
        "patience",
        "--wait-timeout",
        "600",
        timeout=660,
    )
    elapsed = time.monotonic() - started
    out = done.stdout + done.stderr
    thread = re.search(r"\b(exp-[0-9a-f]+)\b", out)
    assert thread, out
    lines = [m for m in society.lines() if m.get("thread") == thread.group(1)]
    replies = {m["from"]: m for m in lines if m["from"] in NICKS}
    if done.returncode == 0:
        assert "=== DIG REPORT ===" in done.stdout, out
        report = next(m for m in lines if (m.get("data") or {}).get("outcome") == "dig-report")
        indexed = (society.root / "kb" / "corpus_index.md").read_text()
        for item in report["data"]["deep_cuts"] + report["data"]["direct_hits"]:
            assert item["file"].removeprefix("Corpus/") in indexed, item  # never made up
    else:
        assert done.returncode == 1, out
        failed = re.search(r"\[STEP_(\d) FAILED — (.+)", out)
        assert failed, out
        step = int(failed.group(1))
        assert 1 <= step <= 5, out  # a model step, or what it fed found nothing
        failing = next(m for m in lines if (m.get("data") or {}).get("failed"))
        assert failing["from"] in (*NICKS, "retriever", "excerpter"), failing
        assert not {"terms", "scores", "deep_cuts"} & set(failing["data"]), failing
    judgments = []
    for nick, reply in replies.items():
        data = reply["data"]
        if data.get("failed"):
            continue
        if nick == "scotoma" and data["seat"] is None:  # no row left to offer: no call
            assert "so no model was asked" in reply["body"] and data["pass4_empty"], reply
            assert "judgment" not in data, reply
            continue
        assert data["seat"] == {"termgen": "termgen", "scorer": "score"}.get(nick, nick)
        judgments += data.get("judgments") or [data["judgment"]]
    evidence = gather(demo_gw, llama, NICKS, before)
    evidence.judgments = judgments
    bounds = {
        "termgen": {TERMS_TOKENS},
        "score": {SCORE_TOKENS_BASE + SCORE_TOKENS_PER_ROW * BATCH},
        "scotoma": {SCOTOMA_TOKENS_BASE + SCOTOMA_TOKENS_PER_CUT * MAX_DEEP_CUTS},
    }
    evidence.assert_honest(bounds)
    up.stop()
    audit(society.root)
    print(f"expedition on SmolLM2: exit {done.returncode} in {elapsed:.0f} s")
    print(out[-3000:])

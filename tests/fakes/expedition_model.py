#!/usr/bin/env python3
"""A fake model for the expedition's three judgments: reads the prompt, answers from it.

A real program the `cmd` seat runs. It reads the self-contained prompt on
stdin, takes the step from its first line and the inputs from its JSON
block, and answers as a plausible model would: terms for the pattern,
scores from how many search terms a summary contains, deep cuts among
strong rows that do not name the keyword. Behaviour is set by environment:

    FAKE_EXPEDITION_MODE   good (default) | garbage-once | garbage-always | slow | one-slot
    FAKE_EXPEDITION_STATE  a file counting calls per step (for garbage-once)
    FAKE_MODEL_LOG         JSON lines, one per call: {"step", "prompt"}
    FAKE_EXPEDITION_SLEEP  seconds the `slow` mode waits before answering
    FAKE_EXPEDITION_SLOT   `one-slot`: a lock file; each call holds it while it sleeps and
                           answers, so calls are answered one after another, as a server
                           with one slot (`--parallel 1`) answers requests sent at once

Stdlib only, so it starts fast.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

TERMS = [
    "rushed",
    "cracked",
    "overnight",
    "slowly",
    "waiting",
    "curing",
    "seasoning",
    "drying",
    "rest",
    "proofing",
    "settle",
    "time",
]


def inputs_of(prompt: str) -> dict:
    start = prompt.index("Inputs:\n") + len("Inputs:\n")
    end = prompt.index("\n\nReturn ONLY")
    return json.loads(prompt[start:end])


def answer(step: str, data: dict) -> dict:
    if step == "termgen":
        return {"terms": TERMS}
    if step == "score":
        terms = [t.lower() for t in data.get("search_terms", [])]
        scores = []
        for row in data["rows"]:
            hits = sum(term in row["summary"].lower() for term in terms)
            scores.append(
                {"id": row["id"], "embodies": min(3, hits), "why": f"shares {hits} search terms"}
            )
        return {"scores": scores}
    if step == "scotoma":
        keyword = data["keyword"].lower()
        rows = sorted(data["rows"], key=lambda r: -(r.get("embodies") or 0))
        cuts = [
            r
            for r in rows
            if keyword not in (r.get("summary") or "").lower() and (r.get("embodies") or 0) >= 1
        ][:1]
        hits = [r["id"] for r in rows if keyword in (r.get("summary") or "").lower()][:3]
        return {
            "deep_cuts": [
                {"id": r["id"], "connection": "the same slowness, never named"} for r in cuts
            ],
            "direct_hits": hits,
            "pass4_empty": not cuts,
        }
    raise SystemExit(f"expedition_model: no answer for step {step!r}")


def main() -> int:
    prompt = sys.stdin.read()
    step = prompt.split("\n", 1)[0].removeprefix("step: ").strip()
    log = os.environ.get("FAKE_MODEL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, "prompt": prompt}) + "\n")
    mode = os.environ.get("FAKE_EXPEDITION_MODE", "good")
    calls = 0
    state = os.environ.get("FAKE_EXPEDITION_STATE")
    if state:  # score batches run at once: one process at a time reads and writes the counts
        with open(f"{state}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            counts = json.loads(Path(state).read_text()) if os.path.exists(state) else {}
            calls = counts.get(step, 0)
            counts[step] = calls + 1
            Path(state).write_text(json.dumps(counts))
    if mode == "garbage-always" or (mode == "garbage-once" and calls == 0):
        print("Sure! Here are some great terms for you: patience, waiting, and more.")
        return 0
    if mode == "slow":
        time.sleep(float(os.environ.get("FAKE_EXPEDITION_SLEEP", "3")))
    if mode == "one-slot":
        with open(os.environ["FAKE_EXPEDITION_SLOT"], "a") as slot:
            fcntl.flock(slot, fcntl.LOCK_EX)  # released when this process ends
            time.sleep(float(os.environ.get("FAKE_EXPEDITION_SLEEP", "3")))
            print(json.dumps(answer(step, inputs_of(prompt))), flush=True)
        return 0
    print(json.dumps(answer(step, inputs_of(prompt))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A fake backpass model with a context window, as a real model has one.

A real program the `cmd` seat runs, prompt on stdin, JSON on stdout:

    analysis   a prompt longer than FAKE_CONTEXT_CHARS is refused the way a
               server refuses it (exit 1, "context length exceeded"); else
               every transcript line holding `LESSON:` is a positive item,
               the line itself its quote, the words after `LESSON:` its text
    synthesis  an over-eager model: it proposes an `add` for EVERY open ledger
               line, whatever the number of sessions that saw it, citing the
               line's id (so the two-session threshold must be kept in code)

FAKE_MODEL_LOG, when set, gets one JSON line per call: {"step", "chars"}.
Stdlib only, so it starts fast.
"""

from __future__ import annotations

import json
import os
import re
import sys

BEGIN, END = "=== TRANSCRIPT BEGIN ===\n", "\n=== TRANSCRIPT END ==="
LEDGER_LINE = re.compile(r"^(L-[0-9a-f]{8})  \[(\w+)\] (.*)  \((\d+) sessions?\)$", re.M)


def analysis(prompt: str) -> dict:
    limit = int(os.environ.get("FAKE_CONTEXT_CHARS", "0") or 0)
    if limit and len(prompt) > limit:
        sys.stderr.write(
            f"error: context length exceeded: the prompt is {len(prompt)} characters, "
            f"this model takes {limit}\n"
        )
        raise SystemExit(1)
    transcript = prompt[prompt.index(BEGIN) + len(BEGIN) : prompt.rindex(END)]
    items = [
        {"text": line.split("LESSON:", 1)[1].strip(), "quote": line.strip()}
        for line in transcript.splitlines()
        if "LESSON:" in line
    ]
    return {"positive": items, "negative": [], "gaps": []}


def synthesis(prompt: str) -> dict:
    edits = [
        {
            "repo": "private",
            "op": "add",
            "bullet": None,
            "text": text.strip(),
            "sources": [line_id],
            "reason": f"seen in {count} session(s)",
        }
        for line_id, _kind, text, count in LEDGER_LINE.findall(prompt)
    ]
    return {"edits": edits, "summary": f"{len(edits)} lessons proposed."}


def main() -> int:
    prompt = sys.stdin.read()
    step = prompt.split("\n", 1)[0].removeprefix("step: ").strip()
    log = os.environ.get("FAKE_MODEL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": step, "chars": len(prompt)}) + "\n")
    answer = analysis(prompt) if step == "analysis" else synthesis(prompt)
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())

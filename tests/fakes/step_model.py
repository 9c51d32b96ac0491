#!/usr/bin/env python3
"""A fake judging model for step cases: a real program a `kind = "cmd"` seat runs.

It reads the prompt on stdin and answers by the step its first line names, as a model
that understands the format but not the work would:

  score      every id of the batch (the prompt's "in this order: …") scored 0
  scotoma    no deep cut
  synthesis  one public bullet: the first open ledger line of the prompt seen in two
             sessions or more (the first line when none is), citing its id, so a backpass
             run on this seat keeps a lesson every nick is then handed

Each call is logged as one JSON line (step, prompt) to FAKE_STEP_LOG when it is set.
"""

from __future__ import annotations

import json
import os
import re
import sys

LEDGER_LINE = re.compile(r"^(L-[0-9a-f]{8})  \[[a-z]+\] (.*?)  \((\d+) sessions?\)$", re.M)


def answer(step: str, prompt: str) -> dict[str, object]:
    if step == "score":
        order = re.search(r"in this order: (.*?);", prompt)
        ids = order.group(1).split(", ") if order else []
        return {"scores": {i: {"embodies": 0, "why": "no shared words"} for i in ids}}
    if step == "scotoma":
        return {"deep_cuts": []}
    if step == "synthesis":
        lines = list(LEDGER_LINE.finditer(prompt))
        found = next((line for line in lines if int(line.group(3)) >= 2), None)
        found = found or next(iter(lines), None)
        if found is None:
            return {"edits": [], "summary": "the ledger holds no open line"}
        edit = {
            "repo": "public",
            "op": "add",
            "text": found.group(2),
            "sources": [found.group(1)],
            "reason": "seen in the traces",
        }
        return {"edits": [edit], "summary": "one public lesson from the ledger"}
    return {}


def main() -> int:
    prompt = sys.stdin.read()
    step = prompt.split("\n", 1)[0].removeprefix("step:").strip()
    if os.environ.get("FAKE_STEP_LOG"):
        with open(os.environ["FAKE_STEP_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"step": step, "prompt": prompt}) + "\n")
    print(json.dumps(answer(step, prompt)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

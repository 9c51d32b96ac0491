#!/usr/bin/env python3
"""A fake model that talks like one: natural, inflected phrases for a theme.

A real program the `cmd` seat runs (stdin: the expedition's self-contained
prompt; stdout: its JSON). Where tests/fakes/expedition_model.py answers
bare words that happen to sit in the index, this one answers the way a
model does when asked for terms: ordinary phrases ("swimming in cold
water", "the rituals of winter bathing") that name a theme in its own
inflections, never the index's. Its judgments read words as a model does,
by their stems, not their exact characters:

    termgen   the phrases listed for the prompt's keyword in FAKE_PHRASES_FILE
              (a JSON object: keyword -> [phrases]), whatever the redirect
    score     embodies: how many stems of the search terms' words a summary
              holds (0 -> 0, 1 -> 1, 2-3 -> 2, 4+ -> 3)
    scotoma   deep cuts: the two best rows (embodies 2+) that never name the
              keyword; direct hits: the rows that do

Stdlib only, with its own crude suffix stemmer, so it shares no code with
the retrieval it is testing. FAKE_MODEL_LOG, when set, gets one JSON line
per call: {"step", "prompt"}.
"""

from __future__ import annotations

import json
import os
import re
import sys

STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "with",
        "by",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "that",
        "this",
        "those",
        "these",
        "their",
        "them",
        "they",
        "his",
        "her",
        "our",
        "your",
        "my",
        "we",
        "you",
        "i",
        "or",
        "not",
        "no",
        "so",
        "too",
        "very",
        "what",
        "who",
        "after",
        "before",
        "over",
        "under",
        "up",
        "down",
        "out",
        "into",
        "than",
        "then",
        "when",
        "while",
    ]
)
SUFFIXES = ("ations", "ation", "ingly", "ings", "ing", "ers", "ies", "ied", "er", "ed", "es", "s")


def stem(word: str) -> str:
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)].rstrip("e")
    return word.rstrip("e")


def stems(text: str) -> set[str]:
    return {stem(w) for w in re.findall(r"[a-z]+", text.lower()) if w not in STOP and len(w) > 2}


def inputs_of(prompt: str) -> dict:
    start = prompt.index("Inputs:\n") + len("Inputs:\n")
    end = prompt.index("\n\nReturn ONLY")
    return json.loads(prompt[start:end])


def phrases_for(keyword: str) -> list[str]:
    with open(os.environ["FAKE_PHRASES_FILE"], encoding="utf-8") as handle:
        table = json.load(handle)
    return list(table.get(keyword.lower(), []))


def embodies(summary: str, theme: set[str]) -> int:
    hits = len(stems(summary) & theme)
    return 0 if hits == 0 else 1 if hits == 1 else 2 if hits <= 3 else 3


def answer(step: str, data: dict) -> dict:
    if step == "termgen":
        return {"terms": phrases_for(data["keyword_primary"])}
    if step == "score":
        theme = set().union(*(stems(t) for t in data.get("search_terms", [])))
        return {
            "scores": [
                {
                    "id": row["id"],
                    "embodies": embodies(row["summary"], theme),
                    "why": "how much of the theme it holds",
                }
                for row in data["rows"]
            ]
        }
    if step == "scotoma":
        key = stems(data["keyword"])
        rows = sorted(data["rows"], key=lambda r: -(r.get("embodies") or 0))

        def names(row: dict) -> bool:
            return bool(key & stems(f"{row.get('summary', '')} {row.get('keypoints', '')}"))

        cuts = [r for r in rows if not names(r) and (r.get("embodies") or 0) >= 2][:2]
        return {
            "deep_cuts": [
                {"id": r["id"], "connection": "lives the theme without its name"} for r in cuts
            ],
            "direct_hits": [r["id"] for r in rows if names(r)][:3],
            "pass4_empty": not cuts,
        }
    raise SystemExit(f"phrase_model: no answer for step {step!r}")


def main() -> int:
    prompt = sys.stdin.read()
    step = prompt.split("\n", 1)[0].removeprefix("step: ").strip()
    log = os.environ.get("FAKE_MODEL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": step, "prompt": prompt}) + "\n")
    print(json.dumps(answer(step, inputs_of(prompt))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

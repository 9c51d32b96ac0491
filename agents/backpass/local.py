"""The local seat's answers for the backpass: deterministic, offline, and honest.

They never pretend to understand a trace. `analysis` picks sentences of
the trace itself by plain markers (a question, TODO or "not sure" is a
gap; "worked", "fixed", "passed" … is positive; "failed", "error",
"missing" … is negative) and quotes them verbatim, so every item it returns
survives the quote check. `synthesis` proposes a private bullet for every
open ledger line seen in at least `min_sessions` sessions that no bullet
covers, and nothing else: it never edits public memory or rewrites a bullet.
"""

from __future__ import annotations

import re
from typing import Any

from agents.backpass.memory import covers, tokens

__all__ = ["LOCAL_ANSWERS", "analysis", "synthesis"]

MAX_PER_KIND = 12
MIN_CHARS, MAX_CHARS = 12, 300

# A sentence ends at . ! or ? followed by a space or the end of the line (so memory.md stays whole).
_SENTENCE = re.compile(r"(?:[^\n.!?]|[.!?]+(?=[^\s.!?]))+(?:[.!?]+|$)", re.MULTILINE)
_LABEL = re.compile(r"^\s*(?:[-*>#]+\s*)*(?:[a-z_]{1,20}:\s+)?")  # markers, a rendered key
_GAP = re.compile(r"\?\s*$|\bTODO\b|\bFIXME\b|\bnot sure\b|\bunclear\b|\bdon't know\b", re.I)
_POSITIVE = re.compile(
    r"\b(worked|works|fixed|passe[sd]|succeeded|success(?:ful(?:ly)?)?|solved|resolved)\b", re.I
)
_NEGATED = re.compile(r"\b(?:not|never|n't)\s+(?:\w+\s+)?$", re.I)
_NEGATIVE = re.compile(
    r"\b(fail(?:s|ed|ing|ures?)?|errors?|broke(?:n)?|missing|crash(?:ed|es)?|wrong|bug|exception|"
    r"traceback|refused|timed out|timeout|cannot|can't|couldn't|not found)\b",
    re.I,
)


def _kind(sentence: str) -> str | None:
    if _GAP.search(sentence):
        return "gaps"
    positive = _POSITIVE.search(sentence)
    if positive and not _NEGATED.search(sentence[: positive.start()]):
        return "positive"
    if positive or _NEGATIVE.search(sentence):
        return "negative"
    return None


def analysis(payload: dict[str, Any]) -> dict[str, Any]:
    """Items from marker sentences of `payload["text"]`, each quoting its own sentence."""
    text = str(payload.get("text", ""))
    answer: dict[str, list[dict[str, str]]] = {"positive": [], "negative": [], "gaps": []}
    seen: set[str] = set()
    for match in _SENTENCE.finditer(text):
        raw = match.group(0)
        label = _LABEL.match(raw)
        sentence = raw[label.end() if label else 0 :].strip()
        folded = " ".join(sentence.split())
        if not MIN_CHARS <= len(folded) <= MAX_CHARS or folded in seen:
            continue
        kind = _kind(sentence)
        if kind is None or len(answer[kind]) >= MAX_PER_KIND:
            continue
        seen.add(folded)
        answer[kind].append({"text": folded, "quote": sentence})
    return answer


def synthesis(payload: dict[str, Any]) -> dict[str, Any]:
    """A private `add` edit per well-corroborated open ledger line that no bullet covers."""
    minimum = int(payload.get("min_sessions", 2))
    threshold = float(payload.get("cover_threshold", 0.8))
    bullets = payload.get("bullets", {})
    bullet_tokens = [
        tokens(str(b["text"])) for repo in ("public", "private") for b in bullets.get(repo, [])
    ]
    edits: list[dict[str, Any]] = []
    for line in payload.get("ledger", []):
        sessions = list(line.get("sessions", []))
        wanted = tokens(str(line["text"]))
        if len(sessions) < minimum or any(covers(b, wanted, threshold) for b in bullet_tokens):
            continue
        bullet_tokens.append(wanted)  # two near-identical lines become one bullet
        edits.append(
            {
                "repo": "private",
                "op": "add",
                "text": str(line["text"]),
                "sources": [line["id"]],
                "reason": f"seen in {len(sessions)} sessions; no bullet covers it",
            }
        )
    summary = (
        f"The local seat proposed {len(edits)} private bullet(s): open ledger lines seen in at "
        f"least {minimum} sessions that no bullet covers. It never edits public memory and "
        "never rewrites or removes a bullet; a model seat can."
    )
    return {"edits": edits, "summary": summary}


LOCAL_ANSWERS = {"analysis": analysis, "synthesis": synthesis}

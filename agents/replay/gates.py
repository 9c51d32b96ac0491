"""Whether an answer passes its step's gates: the pipelines' own checks, run again.

Every step has the foreman's gate, `answered`: an answer flagged `failed`
(the lurker's `[NICK FAILED — …]`) ends a run. Model steps also have the
checks their handler applies before it retries or fails, taken from the
pipeline's own modules, never re-implemented here:

    terms     the fan-out gate (agents/expedition/terms.py: check_terms)
    score     every id of the batch scored exactly once (scoring.scores_schema)
    scotoma   deep cuts and direct hits among the rows shown (scotoma.scotoma_schema)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from room.message import Message

Check = Callable[[dict[str, Any], dict[str, Any]], str | None]  # (ask data, answer data) -> why


def _answered(ask: dict[str, Any], answer: dict[str, Any]) -> str | None:
    if answer.get("failed"):
        return str(answer.get("reason") or "the step failed")
    return None


def _fanout(ask: dict[str, Any], answer: dict[str, Any]) -> str | None:
    from agents.expedition.terms import anchor_words, check_terms

    context = ask.get("context") or {}
    anchors = anchor_words(
        str(context.get("keyword_primary") or ""),
        str(context.get("title") or ""),
        context.get("blaze_phrases") or [],
    )
    checked = check_terms([str(t) for t in answer.get("terms") or []], anchors)
    return None if checked.ok else checked.problems()


def _row_ids(ask: dict[str, Any]) -> list[str]:
    return [str(row.get("id")) for row in ask.get("rows") or [] if isinstance(row, dict)]


def _validated(schema: Any, answer: dict[str, Any]) -> str | None:
    try:
        schema.model_validate(answer)
    except ValidationError as exc:
        return "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
    return None


def _scores(ask: dict[str, Any], answer: dict[str, Any]) -> str | None:
    from agents.expedition.scoring import scores_schema

    return _validated(scores_schema(_row_ids(ask)), answer)


def _scotoma(ask: dict[str, Any], answer: dict[str, Any]) -> str | None:
    from agents.expedition.scotoma import scotoma_schema

    return _validated(scotoma_schema(_row_ids(ask)), answer)


# A step's gates by the handler that answers it (beyond `answered`, which every step has).
BY_HANDLER: dict[str, dict[str, Check]] = {
    "agents.expedition.steps:gen_terms": {"fanout": _fanout},
    "agents.expedition.steps:score_batch": {"every_id_once": _scores},
    "agents.expedition.steps:pick_scotoma": {"rows_shown": _scotoma},
}


def check(handler: str | None, ask: Message, answer: dict[str, Any]) -> dict[str, Any]:
    """{"pass": bool, "checks": {gate: bool}, "failed": {gate: why}} for one answer."""
    gates: dict[str, Check] = {"answered": _answered}
    if not answer.get("failed"):  # a failed answer has nothing else to check
        gates.update(BY_HANDLER.get(handler or "", {}))
    ask_data = dict(ask.data or {})
    failed: dict[str, str] = {}
    checks: dict[str, bool] = {}
    for name, gate in gates.items():
        why = gate(ask_data, answer)
        checks[name] = why is None
        if why is not None:
            failed[name] = why
    return {"pass": not failed, "checks": checks, "failed": failed}

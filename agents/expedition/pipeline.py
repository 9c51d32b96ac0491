"""The expedition as the foreman runs it: what to ask next, given the thread so far.

`Expedition.advance` is a pure function of the Run. It walks the steps in
order; the first step without a reply decides what happens now: ask it, wait
for it, or, if it failed, end the run with `[STEP_n FAILED — reason]`. Score
batches are asked all at once and joined when every one is in.

The two-turn gate: after the Dig Report nothing is asked until the operator
answers it. `confirm` (optionally `drop row_5 ...`, `anchor FILE`) asks the briefer;
`redirect <text>` starts a new dig from the terms with the operator's words
added to the pattern, under keys suffixed `@1`, `@2`, ... so each round is
new to the runtime and earlier rounds stay in the thread as history.
A brief refused for want of a voice anchor is a MISSING report the run
waits on, like a Dig Report: an answer naming a file (`anchor FILE`) asks the
briefer again (`brief/1`, ...), up to MAX_ROUNDS times, then the run ends.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from agents.expedition.config import ExpeditionConfig
from agents.expedition.context import searched_terms, with_redirects
from agents.expedition.report import (
    Decision,
    Dig,
    is_dropped,
    parse_answer,
    tally_of,
    unknown_drops,
)
from agents.expedition.scoring import batches, merge
from agents.expedition.scotoma import chosen, top_rows
from agents.foreman.pipeline import Action, Ask, Report, Run
from room.message import Message

if TYPE_CHECKING:
    from agents.home import Home

STEP_NUMBERS = {
    "context": 0,
    "terms": 1,
    "retrieve": 2,
    "score": 3,
    "scotoma": 4,
    "excerpts": 5,
    "brief": 6,
}
DEFAULT_NICKS = {
    "context": "context",
    "terms": "termgen",
    "retrieve": "retriever",
    "score": "scorer",
    "scotoma": "scotoma",
    "excerpts": "excerpter",
    "brief": "briefer",
}
MAX_ROUNDS = 5  # a dig and four redirects; more is a new expedition
DIG_REPORT = "dig-report"
_FLAG_REASON = re.compile(r"FAILED\s*—\s*(?P<reason>.*?)\]?\s*$", re.DOTALL)


def round_key(name: str, round_: int) -> str:
    """Round 0 keeps the plain key; a redirected round r suffixes `@r`."""
    return name if round_ == 0 else f"{name}@{round_}"


def failure_reason(reply: Message | None) -> str:
    """What a failed step said, from its data or its FAILED flag."""
    if reply is None:
        return "no reply"
    data = reply.data or {}
    for key in ("reason", "message", "error"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, dict) and isinstance(value.get("message"), str):
            return str(value["message"])
    match = _FLAG_REASON.search(reply.body)
    return (match["reason"] if match else reply.body).strip() or "no reason given"


class _Now(Exception):
    """The walk stops here; `actions` are what is due. Never escapes `advance`."""

    def __init__(self, actions: list[Action]) -> None:
        super().__init__()
        self.actions = actions


def _flags(*datas: dict[str, Any]) -> list[str]:
    seen: list[str] = []
    for data in datas:
        for flag in data.get("flags") or []:
            if flag not in seen:
                seen.append(str(flag))
    return seen


class Expedition:
    """The corpus expedition pipeline (the Pipeline protocol of agents.foreman.pipeline)."""

    name = "expedition"

    def check(self, home: Home) -> None:
        """Refuse a misspelt or out-of-range `[expedition]` key when the foreman starts."""
        ExpeditionConfig.of(home)

    def __init__(self, *, in_flight: int = 8, nicks: dict[str, str] | None = None) -> None:
        self._in_flight = in_flight
        self._nicks = {**DEFAULT_NICKS, **(nicks or {})}

    def in_flight_limit(self, run: Run) -> int:
        return self._in_flight

    def advance(self, run: Run) -> list[Action]:
        if run.finished:
            return []
        try:
            self._walk(run)
        except _Now as now:
            return now.actions
        return []

    # -- the walk --------------------------------------------------------------------------

    def _ask(self, step: str, key: str, body: str, data: dict[str, Any]) -> Ask:
        return Ask(key, self._nicks[step], body, {"step": STEP_NUMBERS[step], **data})

    def _reply(self, run: Run, step: str, ask: Ask, flags: list[str]) -> dict[str, Any]:
        """The step's reply data; otherwise raise what is due instead."""
        if run.ask(ask.key) is None:
            raise _Now([ask])
        if run.failed(ask.key):
            raise _Now([self._failure(run, step, ask.key, flags)])
        reply = run.reply(ask.key)
        if reply is None:
            raise _Now([])
        return dict(reply.data or {})

    def _failure(self, run: Run, step: str, key: str, flags: list[str]) -> Report:
        number = STEP_NUMBERS[step]
        body = f"[STEP_{number} FAILED — {failure_reason(run.reply(key))}]"
        if flags:
            body += "\nFlags: " + " ".join(flags)
        model = tally_of(dict(m.data or {}) for m in run.messages if m.in_reply_to)
        if model.answers or model.missed:
            body += f"\nModel: {model.line()}"
        return Report(
            "failed",
            body,
            {
                "outcome": "failed",
                "step": number,
                "failed_key": key,
                "flags": flags,
                "model": model.data(),
            },
            final=True,
        )

    def _walk(self, run: Run) -> None:
        request = {k: v for k, v in run.request.items() if k != "pipeline"}
        title = request.get("title", "?")
        started = self._reply(
            run, "context", self._ask("context", "context", f"step 0 context: {title}", request), []
        )
        context = started.get("context") or {}
        limits = {**ExpeditionConfig().limits(), **(started.get("limits") or {})}
        redirects: list[str] = []
        for round_ in range(MAX_ROUNDS):
            dig = self._dig(
                run, round_, with_redirects(context, redirects), limits, _flags(started)
            )
            decision = self._decision(run, round_, dig, len(redirects))
            if decision.redirect:
                redirects.append(decision.redirect)
                continue
            self._brief(run, with_redirects(context, redirects), dig, decision, redirects)
            return

    def _dig(
        self,
        run: Run,
        r: int,
        context: dict[str, Any],
        limits: dict[str, int],
        flags: list[str],
    ) -> dict[str, Any]:
        """Steps 1-5 of round r and its Dig Report; what the brief needs from them."""
        keyword = context.get("keyword_primary", "")
        termed = self._reply(
            run,
            "terms",
            self._ask(
                "terms", round_key("terms", r), f"step 1 terms: {keyword}", {"context": context}
            ),
            flags,
        )
        terms = searched_terms([str(t) for t in termed.get("terms") or []], context)
        flags = _flags({"flags": flags}, termed)
        found = self._reply(
            run,
            "retrieve",
            self._ask(
                "retrieve",
                round_key("retrieve", r),
                f"step 2 retrieve: {len(terms)} terms",
                {"context": context, "terms": terms},
            ),
            flags,
        )
        flags = _flags({"flags": flags}, found)
        candidates = list(found.get("candidates") or [])
        merged = self._scores(run, r, context, terms, candidates, limits, flags)
        top = top_rows(merged, limits["top_for_scotoma"])
        picked = self._reply(
            run,
            "scotoma",
            self._ask(
                "scotoma",
                round_key("scotoma", r),
                f"step 4 scotoma: top {len(top)}",
                {
                    "pattern": context.get("pattern"),
                    "keyword": keyword,
                    "terms": terms,
                    "rows": top,
                },
            ),
            flags,
        )
        direct, deep, others = chosen(merged, picked)
        cut = self._reply(
            run,
            "excerpts",
            self._ask(
                "excerpts",
                round_key("excerpts", r),
                f"step 5 excerpts: {len(direct) + len(deep)} files",
                {"context": context, "chosen": direct + deep, "others": others},
            ),
            flags,
        )
        flags = _flags({"flags": flags}, cut)
        excerpts = list(cut.get("excerpts") or [])
        key = round_key(DIG_REPORT, r)
        if run.report(key) is None:
            groups = len(batches(candidates, limits["batch_size"]))
            scored = [run.reply(f"{round_key('score', r)}/{i}") for i in range(1, groups + 1)]
            dig = Dig(
                direct_hits=direct,
                deep_cuts=deep,
                excerpts=excerpts,
                terms=terms,
                scored=len(merged),
                batches=groups,
                pass4_empty=bool(picked.get("pass4_empty")),
                flags=flags,
                redirect=context.get("redirect"),
                model=tally_of([termed, *(dict(m.data or {}) for m in scored if m), picked]),
            )
            raise _Now([Report(key, dig.text(), {"round": r, **dig.data()})])
        return {
            "direct": direct,
            "deep": deep,
            "excerpts": excerpts,
            "terms": terms,
            "flags": flags,
        }

    def _scores(
        self,
        run: Run,
        r: int,
        context: dict[str, Any],
        terms: list[str],
        candidates: list[dict[str, Any]],
        limits: dict[str, int],
        flags: list[str],
    ) -> list[dict[str, Any]]:
        """Step 3: every batch asked at once, joined when all are in."""
        groups = batches(candidates, limits["batch_size"])
        asks = [
            self._ask(
                "score",
                f"{round_key('score', r)}/{i}",
                f"step 3 score: batch {i} of {len(groups)}",
                {
                    "pattern": context.get("pattern"),
                    "keyword": context.get("keyword_primary"),
                    "focus": " ".join(
                        filter(None, [context.get("title"), context.get("redirect")])
                    ),
                    "redirects": list(context.get("redirects") or []),
                    "terms": terms,
                    "rows": [{"id": row["id"], "summary": row["summary"]} for row in group],
                    "batch": i,
                    "of": len(groups),
                },
            )
            for i, group in enumerate(groups, 1)
        ]
        for ask in asks:
            if run.ask(ask.key) is not None and run.failed(ask.key):
                raise _Now([self._failure(run, "score", ask.key, flags)])
        unsent = [ask for ask in asks if run.ask(ask.key) is None]
        if unsent:
            raise _Now(list(unsent))
        answers = [self._reply(run, "score", ask, flags).get("scores") or [] for ask in asks]
        try:
            return merge(candidates, answers)
        except ValueError as exc:
            raise _Now([self._failure_text(f"[STEP_3 FAILED — {exc}]", 3, flags)]) from None

    @staticmethod
    def _failure_text(body: str, step: int, flags: list[str]) -> Report:
        return Report(
            "failed", body, {"outcome": "failed", "step": step, "flags": flags}, final=True
        )

    def _decision(self, run: Run, r: int, dig: dict[str, Any], redirected: int) -> Decision:
        """The operator's first clear answer to round r's Dig Report; until then, stop."""
        shown = (
            dig["direct"] + dig["deep"] + [e for e in dig["excerpts"] if e.get("kind") == "voice"]
        )
        unclear: list[Action] = []
        for answer in run.answers_to(round_key(DIG_REPORT, r)):
            decision = parse_answer(answer.body, answer.data)
            problem = None
            if decision is None:
                problem = "it says none of confirm, drop or redirect"
            elif unknown_drops(decision.drop, shown):
                problem = (
                    "it drops "
                    + ", ".join(unknown_drops(decision.drop, shown))
                    + (", which the Dig Report does not list")
                )
            elif decision.redirect and redirected + 1 >= MAX_ROUNDS:
                problem = f"this run has been redirected {redirected} times; start a new expedition"
            if problem is None and decision is not None:
                return decision
            unclear.append(
                Report(
                    f"unclear/{answer.id}",
                    f"I could not act on your answer: {problem}. Reply 'confirm', "
                    "'confirm, drop row_N ...' or 'redirect <what to look for instead>'.",
                    {"outcome": "unclear"},
                    in_reply_to=run.report(round_key(DIG_REPORT, r)).id,  # type: ignore[union-attr]
                )
            )
        raise _Now(unclear)

    def _brief(
        self,
        run: Run,
        context: dict[str, Any],
        dig: dict[str, Any],
        decision: Decision,
        redirects: list[str],
    ) -> None:
        keep = [e for e in dig["excerpts"] if not is_dropped(e, decision.drop)]
        data = {
            "context": context,
            "excerpts": keep,
            "direct_hits": [h for h in dig["direct"] if not is_dropped(h, decision.drop)],
            "deep_cuts": [c for c in dig["deep"] if not is_dropped(c, decision.drop)],
            "dropped": list(decision.drop),
            "redirects": redirects,
            "terms": dig["terms"],
            "flags": dig["flags"],
        }
        flags = dig["flags"]
        if decision.anchor:
            data["anchor"] = decision.anchor
        done = self._reply(
            run,
            "brief",
            self._ask("brief", "brief", f"step 6 brief: {len(keep)} excerpts", data),
            flags,
        )
        for attempt in range(1, MAX_ROUNDS + 1):
            if done.get("written"):
                break
            anchor = self._anchor_answer(run, missing_key(attempt - 1), done, flags, attempt)
            done = self._reply(
                run,
                "brief",
                self._ask(
                    "brief",
                    f"brief/{attempt}",
                    f"step 6 brief: voice anchor {anchor}",
                    {**data, "anchor": anchor},
                ),
                flags,
            )
        if done.get("written"):
            body = f"brief written: {done.get('path')}\nvoice_anchor: {done.get('voice_anchor')}"
            body += f"\nbanned_phrases: {len(done.get('banned_phrases') or [])}"
            outcome = {"outcome": "brief", "path": done.get("path")}
        else:
            body = _missing_body(done)
            outcome = {"outcome": "missing", "voice_anchor": "MISSING"}
        if flags:
            body += "\nFlags: " + " ".join(flags)
        raise _Now([Report("result", body, {**outcome, "flags": flags}, final=True)])

    def _anchor_answer(
        self, run: Run, key: str, done: dict[str, Any], flags: list[str], attempt: int
    ) -> str:
        """The file the operator points to after a MISSING brief; until then, the run waits.

        The MISSING report is not final while attempts remain: its answer
        (`confirm THREAD --anchor FILE`) gives the briefer a voice anchor to check.
        """
        report = run.report(key)
        if report is None:
            body = _missing_body(done) + ("\nFlags: " + " ".join(flags) if flags else "")
            data = {"outcome": "missing", "voice_anchor": "MISSING", "flags": flags}
            raise _Now([Report(key, body, data)])
        unclear: list[Action] = []
        for answer in run.answers_to(key):
            decision = parse_answer(answer.body, answer.data)
            if decision is not None and decision.anchor:
                return decision.anchor
            unclear.append(
                Report(
                    f"unclear/{answer.id}",
                    "I could not act on your answer: the brief still needs a voice anchor. "
                    "Reply 'anchor <file of the knowledge base>'.",
                    {"outcome": "unclear"},
                    in_reply_to=report.id,
                )
            )
        raise _Now(unclear)


def missing_key(attempt: int) -> str:
    """The MISSING report of the brief's attempt n (0: the first brief)."""
    return "missing" if attempt == 0 else f"missing/{attempt}"


def _missing_body(done: dict[str, Any]) -> str:
    return str(done.get("prompt") or "voice_anchor: MISSING — the brief was not written.")

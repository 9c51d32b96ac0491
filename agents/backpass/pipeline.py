"""The backpass as a foreman pipeline: a pure function from the run's thread to what is next.

    step  key            to            when
    1     list           tracelister   first
    2     analysis/<n>   analyst       one per listed trace, at most `concurrency` awaiting replies
    3     quotes         quotechecker  when every analysis replied, failed or is overdue
    4     ledger         ledgerkeeper  after the quote check
    5     synthesis      synthesizer   after the ledger
          report         (operator)    final: the funnel; also right after `list` when nothing is
                                       pending, and as soon as a list, quotes, ledger or synthesis
                                       step fails

One quote-check ask for all the analyses, not one each: the check is
milliseconds of code, a single ask keeps the thread short (43 traces: 2
messages instead of 86) and never competes with analyses for in-flight
slots, and the drops are counted in one place. The quotes ask records which
analyses it covers and which failed, so a reply that arrives after the run
moved on changes nothing.

An analysis that replies FAILED, or does not reply within its deadline
(the hard timeout plus a margin), is a failed trace: the run goes on with
the others, the trace stays pending, and the command exits non-zero. An
overdue ask no longer holds an in-flight slot (its lurker's own timeout
still bounds the real call), so one stuck call cannot stall the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agents.backpass import chunks, relay
from agents.backpass.config import BackpassConfig, RunParams
from agents.backpass.funnel import Funnel
from agents.foreman.pipeline import Action, Ask, Report, Run
from agents.wording import counted
from room.message import Message

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["NICKS", "Backpass"]

NICKS = {
    "list": "tracelister",
    "analysis": "analyst",
    "quotes": "quotechecker",
    "ledger": "ledgerkeeper",
    "synthesis": "synthesizer",
}
DEFAULT_CONCURRENCY = 4
REPORT = "report"
WHAT_IS_A_TRACE = (
    "every regular file under it is a trace (JSONL, JSON, Markdown or any other text), except "
    "hidden files and folders (names starting with `.`) and binary files (a NUL byte in the "
    "first 8 KiB). Put session transcripts there, or point --traces (or [backpass] traces) at "
    "the folder that holds them"
)


def handed_keys(key: str) -> tuple[str, str, str]:
    """A run artifact's keys in a step's reply: its path, its SHA-256 in the object store,
    and why it is not there (agents/backpass/artifacts.py): carried to the next step."""
    return key, f"{key}_sha256", f"{key}_problem"


def _handed(data: dict[str, object], key: str) -> dict[str, object]:
    return {name: data.get(name) for name in handed_keys(key)}


def _epoch(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _reason(reply: Message | None) -> str:
    if reply is None:
        return "no reply"
    data = reply.data or {}
    text = str(data.get("message") or data.get("reason") or data.get("error") or reply.body)
    return text if len(text) <= 400 else text[:399] + "…"


class Backpass:
    """The memory backpass pipeline (see the module docstring for the keys)."""

    name = "backpass"

    def check(self, home: Home) -> None:
        """Refuse a misspelt or out-of-range `[backpass]` key when the foreman starts."""
        BackpassConfig.from_home(home)

    def __init__(self, nicks: Mapping[str, str] | None = None) -> None:
        self.nicks = {**NICKS, **(nicks or {})}

    # --- the Pipeline protocol -------------------------------------------------------------

    def in_flight_limit(self, run: Run) -> int:
        """The ask's `concurrency` (default 4), plus any overdue asks, which hold no slot."""
        concurrency = run.request.get("concurrency", DEFAULT_CONCURRENCY)
        try:
            limit = max(1, int(concurrency))
        except (TypeError, ValueError):
            limit = DEFAULT_CONCURRENCY
        return limit + sum(1 for ask in run.pending() if self._overdue(run, ask))

    def advance(self, run: Run) -> list[Action]:
        if run.finished:
            return []
        try:
            params = RunParams.model_validate(run.request)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return [
                self._failure(run, Funnel(), [], f"the starting ask's data.{where}: {first['msg']}")
            ]
        base = {"run": params.model_dump(), "date": run.start.ts[:10]}
        funnel = Funnel(report_only=params.report_only, drop_warn_rate=params.drop_warn_rate)

        listing = run.reply("list")
        if listing is None:
            return [Ask("list", self.nicks["list"], "step 1: list pending traces", base)]
        if run.failed("list"):
            return [self._failure(run, funnel, [], f"step 1 (list) failed: {_reason(listing)}")]
        ld = listing.data or {}
        traces: list[dict[str, Any]] = list(ld.get("traces") or [])
        funnel.traces_found = int(ld.get("found", 0))
        funnel.traces_pending = int(ld.get("pending", len(traces)))
        funnel.traces_deferred = int(ld.get("deferred", 0))
        funnel.unchanged = [str(u) for u in ld.get("unchanged") or []]
        funnel.unchanged_count = int(ld.get("unchanged_count", len(funnel.unchanged)))
        funnel.seat_choice = {str(role): how for role, how in params.seat_choice.items()}
        notes = self._notes(ld)
        if not funnel.traces_found:
            body = "\n".join([f"no traces in {params.traces}: {WHAT_IS_A_TRACE}", *notes])
            extra = {"nothing_pending": True, "no_traces": True}
            return [self._final(run, body, funnel, [], extra)]
        if not traces:
            if funnel.traces_found == 1:
                done = "the one trace is unchanged since its last successful analysis"
            else:
                done = f"all {funnel.traces_found} traces are unchanged since their last "
                done += "successful analysis"
            body = f"nothing pending: {done}\n" + funnel.render([], notes)
            return [self._final(run, body, funnel, [], {"nothing_pending": True})]

        quotes_ask = run.ask("quotes")
        if quotes_ask is None:
            return self._analyses(run, params, base, traces, funnel)
        qd = quotes_ask.data or {}
        analyses: list[dict[str, Any]] = list(qd.get("analyses") or [])
        failed: list[dict[str, Any]] = list(qd.get("failed") or [])
        funnel.seats = {role: dict(seats) for role, seats in (qd.get("seats") or {}).items()}
        funnel.fallbacks = int(qd.get("fallbacks", 0))
        funnel.model = dict(qd.get("model") or {})
        quotes = run.reply("quotes")
        if quotes is None:
            return []
        if run.failed("quotes"):
            return [
                self._failure(run, funnel, failed, f"step 3 (quotes) failed: {_reason(quotes)}")
            ]
        q = quotes.data or {}
        checked = {int(n) for n in q.get("checked") or []}
        failed += [
            {"n": c.get("n"), "session": c.get("session"), "reason": c.get("reason")}
            for c in q.get("changed") or []
        ]
        funnel.traces_analyzed = len(checked)
        funnel.traces_failed = len(failed)
        funnel.failed_traces = failed
        funnel.analysed = [
            {k: t.get(k) for k in ("session", "kept", "dropped", "chunks")}
            for t in q.get("per_trace") or []
        ]
        funnel.items_returned = int(q.get("returned", 0))
        funnel.items_dropped = int(q.get("dropped", 0))
        funnel.items_kept = int(q.get("kept", 0))
        succeeded = [
            {"path": a["path"], "sha256": a["sha256"]} for a in analyses if int(a["n"]) in checked
        ]

        ledger = run.reply("ledger")
        if ledger is None:
            data = {**base, **_handed(q, "items_file"), "repos": ld.get("repos")}
            return [Ask("ledger", self.nicks["ledger"], "step 4: ledger lines and prunes", data)]
        if run.failed("ledger"):
            return [
                self._failure(run, funnel, failed, f"step 4 (ledger) failed: {_reason(ledger)}")
            ]
        lg = ledger.data or {}
        for key in (
            "new_lines",
            "corroborations",
            "repeats",
            "covered",
            "prunes_age",
            "prunes_covered",
        ):
            setattr(funnel, key, int(lg.get(key, 0)))

        synthesis = run.reply("synthesis")
        if synthesis is None:
            data = {
                **base,
                **_handed(lg, "ledger_file"),
                "ledger_changed": bool(lg.get("changed")),
                "repos": ld.get("repos"),
                "succeeded": succeeded,
                "funnel": funnel.as_dict(),
            }
            body = "step 5: synthesis, branches, state"
            return [Ask("synthesis", self.nicks["synthesis"], body, data)]
        if run.failed("synthesis"):
            return [
                self._failure(
                    run, funnel, failed, f"step 5 (synthesis) failed: {_reason(synthesis)}"
                )
            ]
        sd = synthesis.data or {}
        edits = sd.get("edits") or {}
        funnel.edits_public = int(edits.get("public", 0))
        funnel.edits_private = int(edits.get("private", 0))
        funnel.add_seat(sd.get("provenance"))
        funnel.synthesis = str(sd.get("synthesis", ""))
        funnel.held_back = [str(line) for line in sd.get("held_back") or []]
        funnel.synthesis_refused = str(sd.get("synthesis_refused") or "")
        for repo, branch in (sd.get("branches") or {}).items():
            commits = counted(len(branch.get("commits") or []), "commit")
            notes.append(f"branch {repo:<13}{branch.get('branch')} ({commits}, unpushed)")
        if sd.get("pr_body"):
            notes.append(f"{'PR body':<20}{sd['pr_body']}")
        final_extra: dict[str, Any] = {
            "branches": sd.get("branches") or {},
            "pr_body": sd.get("pr_body"),
            "state_updated": sd.get("state_updated", 0),
        }
        report = self._final(run, funnel.render(failed, notes), funnel, failed, final_extra)
        if funnel.synthesis_refused:  # the gateway's budget said no: the run did not finish
            report.data.update(ok=False, error=f"synthesis skipped: {funnel.synthesis_refused}")
        return [report]

    # --- stages ------------------------------------------------------------------------------

    def _analyses(
        self,
        run: Run,
        params: RunParams,
        base: dict[str, Any],
        traces: list[dict[str, Any]],
        funnel: Funnel,
    ) -> list[Action]:
        busy = sum(1 for ask in run.pending() if not self._overdue(run, ask))
        free = max(0, max(1, params.concurrency) - busy)
        actions: list[Action] = []
        waiting = False
        ok: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        tally = Funnel()  # the seats that answered, counted here so the entries stay small
        for trace in traces:
            key = f"analysis/{trace['n']}"
            ask, reply = run.ask(key), run.reply(key)
            if ask is None:
                waiting = True
                if free > 0:
                    free -= 1
                    deadline = self._deadline(params, trace)
                    data = {**base, "trace": trace, "deadline_s": deadline}
                    body = f"step 2: analyse {trace['session']}"
                    actions.append(Ask(key, self.nicks["analysis"], body, data, timeout_s=deadline))
            elif reply is None:
                if self._overdue(run, ask):
                    deadline = float((ask.data or {}).get("deadline_s") or 0)
                    reason = f"no reply within {deadline:.0f} s (overdue)"
                    failed.append({"n": trace["n"], "session": trace["session"], "reason": reason})
                else:
                    waiting = True
            elif run.failed(key):
                reason = _reason(reply)
                failed.append({"n": trace["n"], "session": trace["session"], "reason": reason})
            else:
                rd = reply.data or {}
                keep = ("n", "session", "path", "sha256", "size", *handed_keys("artifact"))
                ok.append({k: rd.get(k) for k in keep})
                for provenance in rd.get("provenances") or [rd.get("provenance")]:
                    tally.add_seat(provenance)  # each chunk of a long trace is one call
        if waiting:
            return actions
        if not ok:
            funnel.traces_failed = len(failed)
            return [self._failure(run, funnel, failed, "every pending trace failed its analysis")]
        data = {
            **base,
            "analyses": ok,
            "failed": failed,
            "seats": tally.seats,
            "fallbacks": tally.fallbacks,
            "model": tally.model,
        }
        return [
            Ask(
                "quotes",
                self.nicks["quotes"],
                f"step 3: check the quotes of {len(ok)} analyses",
                data,
            )
        ]

    # --- helpers -----------------------------------------------------------------------------

    @staticmethod
    def _deadline(params: RunParams, trace: Mapping[str, Any]) -> float:
        """The hard timeout for each chunk the trace may take, plus the margin.

        The chunks are counted from the file's size in bytes, never fewer than its
        characters, so a long trace is not declared overdue while its chunks run."""
        size = chunks.window(
            params.context_chars,
            params.context_tokens,
            params.chunk_overlap_chars,
            chunks.TEMPLATE_ALLOWANCE,
        )
        count = chunks.estimate(int(trace.get("size") or 0), size, params.chunk_overlap_chars)
        return params.timeout_s * count + params.timeout_margin_s

    def _overdue(self, run: Run, ask: Message) -> bool:
        deadline = (ask.data or {}).get("deadline_s")
        if not isinstance(deadline, int | float):
            return False
        try:
            return run.now > _epoch(ask.ts) + float(deadline)
        except ValueError:
            return False

    @staticmethod
    def _notes(listing: dict[str, Any]) -> list[str]:
        notes = []
        for name, repo in (listing.get("repos") or {}).items():
            if repo.get("base") != repo.get("default"):
                notes.append(
                    f"{name + ' base':<20}{repo.get('base')} is not merged into "
                    f"{repo.get('default')} yet; tonight's branch builds on it"
                )
        if listing.get("skipped_binary"):
            binary = counted(int(listing["skipped_binary"]), "binary file")
            notes.append(f"{'skipped':<20}{binary} in the traces folder")
        notes += [f"{'template':<20}{note}" for note in listing.get("template_notes") or []]
        notes += relay.announce(listing.get("relays") or [])
        notes += [
            f"{'refused':<20}{link}: a link out of the traces folder, never read"
            for link in listing.get("refused") or []
        ]
        return notes

    def _final(
        self,
        run: Run,
        body: str,
        funnel: Funnel,
        failed: list[dict[str, Any]],
        extra: dict[str, Any],
    ) -> Report:
        data = {
            "ok": not failed,
            "funnel": funnel.as_dict(),
            "failed_traces": failed,
            "report_only": funnel.report_only,
            **extra,
        }
        return Report(REPORT, body, data, final=True)

    def _failure(
        self, run: Run, funnel: Funnel, failed: list[dict[str, Any]], error: str
    ) -> Report:
        funnel.traces_failed = max(funnel.traces_failed, len(failed))
        body = f"BACKPASS FAILED: {error}\n" + funnel.render(failed)
        report = self._final(run, body, funnel, failed, {"error": error})
        report.data["ok"] = False
        return report

"""The build as the foreman runs it: a pure function from the thread to what is next.

    step  key       to             what
    1     (none)    (code)         the ticket checks of §8.3; INVALID TICKET ends the run
    2     prepare   @sandbox       the build dir: root, alias, scaffold, baseline
    3     spec      @testdesigner  the spec exists, is collected, and is red against the stub
    4     grind     @py/@godev/..  routed by the SPEC's file type; the tier ladder in a clone
          report    (operator)     final: green or red, tier, iterations, clone, review

The foreman opens no file and keeps nothing between wakes: the ticket is in
the starting ask, every answer in the thread. A failed or overdue step ends
the run with `[<STEP> FAILED — reason]`. The `[build]` settings the ticket
checks need (root, alias, the grind's bound) are read once, when the
foreman starts (`check`). One refusal looks at society.toml again: a ticket whose
tiers= name a seat the loaded config lacks but the file on disk has is refused
with "restart needed" (the file was edited since the foreman started), not as a typo.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.build.config import BuildConfig
from agents.build.report import failed_report, grind_report, report_data
from agents.build.ticket import TicketError, UnknownSeats, parse_ticket, system_reason
from agents.foreman.pipeline import Action, Ask, Report, Run
from agents.runtime.ping import restart_hint
from room.errors import ConfigError
from room.message import Message

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["NICKS", "STEPS", "Build"]

NICKS = {"prepare": "sandbox", "spec": "testdesigner"}
STEPS = 4
REPORT = "report"
_LABELS = {"prepare": "PREPARE", "spec": "SPEC", "grind": "GRIND"}


def _reason(reply: Message | None) -> str:
    if reply is None:
        return "no reply"
    data = reply.data or {}
    text = str(data.get("reason") or data.get("message") or reply.body)
    return text if len(text) <= 600 else text[:599] + "…"


def seats_on_disk(society_file: Path) -> frozenset[str]:
    """The seat names society.toml holds now (empty when it cannot be read or parsed)."""
    try:
        raw = tomllib.loads(society_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return frozenset()
    seats = raw.get("seats")
    return frozenset(seats) if isinstance(seats, dict) else frozenset()


class Build:
    """The test-first build pipeline (the Pipeline protocol of agents.foreman.pipeline)."""

    name = "build"

    def __init__(self) -> None:
        self.config = BuildConfig()
        self.seats: frozenset[str] | None = None  # the configured seat names, once checked
        self.society_file: Path | None = None  # where they were read, to spot a later edit

    def check(self, home: Home) -> None:
        """Refuse a misspelt `[build]` key, or a root or alias under /home or a system path,
        when the foreman starts; keep the settings for the ticket checks."""
        config = BuildConfig.of(home)
        for key in ("root", "alias"):
            reason = system_reason(getattr(config, key))
            if reason is not None:
                raise ConfigError(f"{home.society_file}: build.{key}: {reason}")
        self.config = config
        self.seats = frozenset(home.society.seats)
        self.society_file = home.society_file

    def _restart_needed(self, exc: TicketError, foreman: str) -> str:
        """The note for a seat society.toml configures now but did not when the foreman
        started; "" when there is none (a misspelt seat is the ticket's fault)."""
        if not isinstance(exc, UnknownSeats) or self.society_file is None:
            return ""
        added = [seat for seat in exc.unknown if seat in seats_on_disk(self.society_file)]
        if not added:
            return ""
        return (
            f"; restart needed: {self.society_file} now configures "
            f"{', '.join(f'[seats.{seat}]' for seat in added)}, added since @{foreman} "
            f"started; {restart_hint(foreman)}, then post the ticket again"
        )

    def in_flight_limit(self, run: Run) -> int:
        return 1

    def advance(self, run: Run) -> list[Action]:
        if run.finished:
            return []
        try:
            ticket = parse_ticket(str(run.request.get("ticket") or ""), self.config, self.seats)
        except TicketError as exc:
            body = f"INVALID TICKET — {exc}{self._restart_needed(exc, run.foreman)}"
            return [
                Report(
                    REPORT,
                    body,
                    report_data(green=False, invalid=True, reason=str(exc), outcome="invalid"),
                    final=True,
                )
            ]
        s = ticket.sections
        base: dict[str, Any] = {
            "repo": ticket.repo,
            "spec_relative": ticket.spec_relative,
            "language": ticket.language.name,
            "targets": ticket.targets,
        }
        actions: list[Action] = []
        if run.report("checked") is None:
            actions.append(
                Report(
                    "checked",
                    f"step 1/{STEPS} ticket checked: {ticket.language.name} spec "
                    f"{ticket.spec_relative} → @{ticket.language.nick}",
                    {"step": 1, "language": ticket.language.name, "grinder": ticket.language.nick},
                )
            )
        prepared = self._step(run, actions, "prepare", NICKS["prepare"], base, ticket.repo)
        if prepared is None:
            return actions
        built = {**base, "build_dir": prepared["build_dir"], "baseline": prepared["baseline"]}
        spec_ask = {
            **built,
            "problem": s["PROBLEM"],
            "traps": s["TRAPS"],
            "contract": s["STEP 1"],
        }
        spec = self._step(run, actions, "spec", NICKS["spec"], spec_ask, ticket.spec_relative)
        if spec is None:
            return actions
        routed = None
        if ticket.routed_away:
            routed = (
                f"routed: the ticket named @{ticket.addressed}, but {ticket.spec_relative} is a "
                f"{ticket.language.name} spec, so @{ticket.language.nick} ground it (by file type)"
            )
        grind_ask = {
            **built,
            "baseline": spec.get("baseline") or prepared["baseline"],
            "problem": s["PROBLEM"],
            "traps": s["TRAPS"],
            "constraints": s["Constraints"],
            "tiers": ticket.tiers or None,
            "routed": routed,
            "handoff": spec.get("handoff"),  # the build dir as a bundle, for another host
            "handoff_problem": spec.get("handoff_problem"),
        }
        grind = self._step(
            run,
            actions,
            "grind",
            ticket.language.nick,
            grind_ask,
            f"{ticket.spec_relative} ({spec.get('passing', 0)}/{spec.get('total', 0)} passing)",
            spec,
            timeout=self.config.grind_timeout_s + 120,
        )
        if grind is None:
            return actions
        body, data = grind_report(grind, routed)
        return [*actions, Report(REPORT, body, data, final=True)]

    def _step(
        self,
        run: Run,
        actions: list[Action],
        key: str,
        nick: str,
        data: dict[str, Any],
        what: str,
        spec: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any] | None:
        """The step's reply data; otherwise what is due goes into `actions` and None returns."""
        number = {"prepare": 2, "spec": 3, "grind": 4}[key]
        if run.ask(key) is None:
            body = f"step {number}/{STEPS} {key}: {what}"
            actions.append(Ask(key, nick, body, {"step": number, **data}, timeout_s=timeout))
            return None
        reply = run.reply(key)
        if reply is None:
            overdue = run.report(f"overdue/{key}")
            if overdue is not None:  # the step will not answer: say so, and end the run
                reason = f"@{nick} did not reply in time ({overdue.body.strip('[]')})"
                actions.append(
                    Report(REPORT, *failed_report(_LABELS[key], reason, spec), final=True)
                )
            return None
        if run.failed(key):
            body, fail = failed_report(_LABELS[key], _reason(reply), spec)
            actions.append(Report(REPORT, body, fail, final=True))
            return None
        return dict(reply.data or {})

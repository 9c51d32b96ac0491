"""The funnel: what a run did, counted, and the alarm it raises.

    traces found ─ pending ─ analysed ──┬─ items returned ─┬─ dropped (quote not in trace)
                           └ failed     │                  └─ kept ─┬─ new ledger lines
                                        │                           ├─ corroborations
                                        │                           ├─ repeats (same session)
                                        │                           └─ already in memory
    prunes (age, covered) · edits (public, private) · seats (and fallbacks)

A few percent of items dropped for a missing quote is the baseline; far
more (above `drop_warn_rate`, default 10%) means the trace text the model
saw was not the trace on disk — corrupted input, not a bad model. The hand
run's `&` bug showed up as exactly that: a 36% drop rate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from agents.seats.tally import Tally
from agents.wording import counted

__all__ = ["Funnel", "seat_label"]


def seat_label(provenance: Mapping[str, Any]) -> str:
    return f"{provenance.get('seat', '?')} ({provenance.get('seat_kind', '?')})"


@dataclass
class Funnel:
    report_only: bool = False
    traces_found: int = 0
    traces_pending: int = 0
    traces_deferred: int = 0
    traces_analyzed: int = 0
    traces_failed: int = 0
    items_returned: int = 0
    items_dropped: int = 0
    items_kept: int = 0
    new_lines: int = 0
    corroborations: int = 0
    repeats: int = 0
    covered: int = 0
    prunes_age: int = 0
    prunes_covered: int = 0
    edits_public: int = 0
    edits_private: int = 0
    seats: dict[str, dict[str, int]] = field(default_factory=dict)  # role -> seat -> calls
    fallbacks: int = 0
    model: dict[str, Any] = field(default_factory=dict)  # Tally.data(): rescues, gates missed
    synthesis: str = ""  # "called", or why it was skipped
    synthesis_refused: str = ""  # the gateway's budget said no: the run fails
    drop_warn_rate: float = 0.10
    seat_choice: dict[str, str] = field(default_factory=dict)  # role -> "seat (from where)"
    analysed: list[dict[str, Any]] = field(default_factory=list)  # session, kept, dropped
    failed_traces: list[dict[str, Any]] = field(default_factory=list)  # session, reason
    unchanged: list[str] = field(default_factory=list)  # sessions, the first UNCHANGED_NAMED
    unchanged_count: int = 0
    held_back: list[str] = field(default_factory=list)  # adds under the session threshold

    def add_seat(self, provenance: Mapping[str, Any] | None) -> None:
        if not provenance:
            return
        role = str(provenance.get("role", "?"))
        label = seat_label(provenance)
        counts = self.seats.setdefault(role, {})
        counts[label] = counts.get(label, 0) + 1
        if provenance.get("fallback_used"):
            self.fallbacks += 1
        tally = Tally(**self.model)
        tally.add(provenance)
        self.model = tally.data()

    @property
    def prunes(self) -> int:
        return self.prunes_age + self.prunes_covered

    @property
    def edits(self) -> int:
        return self.edits_public + self.edits_private

    @property
    def drop_rate(self) -> float:
        return self.items_dropped / self.items_returned if self.items_returned else 0.0

    def warnings(self) -> list[str]:
        out = []
        if self.items_returned and self.drop_rate > self.drop_warn_rate:
            out.append(
                f"WARNING: {self.drop_rate:.0%} of the items were dropped for a quote that is "
                f"not in their trace (baseline: a few percent; alarm above "
                f"{self.drop_warn_rate:.0%}). That means corrupted input, not a bad model: "
                "check that the prompt shows each trace exactly (see `bullpen docs backpass`)."
            )
        if self.fallbacks:
            out.append(f"NOTE: the fallback seat answered {self.fallbacks} call(s).")
        return out

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            prunes=self.prunes,
            edits=self.edits,
            drop_rate=round(self.drop_rate, 4),
            warnings=self.warnings(),
        )
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Funnel:
        known = {name for name in cls.__dataclass_fields__}
        return cls(**{key: value for key, value in data.items() if key in known})

    def render(self, failed: Iterable[Mapping[str, Any]] = (), notes: Iterable[str] = ()) -> str:
        """The funnel as people read it, on stdout and in the final report."""
        title = "=== BACKPASS FUNNEL" + (
            " (report only: memory, ledger and state untouched)" if self.report_only else ""
        )
        rows = [
            ("traces found", f"{self.traces_found}"),
            ("pending", f"{self.traces_pending}"
             + (f" ({self.traces_deferred} more wait for the next run)" if self.traces_deferred else "")),
            ("analysed", f"{self.traces_analyzed}" + self._chunked()),
            ("failed", f"{self.traces_failed}" + (" (they stay pending)" if self.traces_failed else "")),
            ("items returned", f"{self.items_returned}"),
            ("dropped: no quote", f"{self.items_dropped} ({self.drop_rate:.1%})"),
            ("items kept", f"{self.items_kept}"),
            ("  new ledger lines", f"{self.new_lines}"),
            ("  corroborations", f"{self.corroborations}"),
            ("  repeats", f"{self.repeats} (same session, same line)"),
            ("  already in memory", f"{self.covered}"),
            ("prunes", f"{self.prunes} ({self.prunes_age} by age, {self.prunes_covered} covered)"),
            ("edits", f"{self.edits} (public {self.edits_public}, private {self.edits_private})"),
        ]  # fmt: skip
        lines = [title + " ==="]
        lines += [f"{label:<20}{value}" for label, value in rows]
        if self.synthesis:
            lines.append(f"{'synthesis':<20}{self.synthesis}")
        if self.held_back:
            lines.append(
                f"{'held back':<20}{len(self.held_back)} new lesson(s) under the threshold"
            )
            lines += [f"  {line}" for line in self.held_back]
        for role in sorted(self.seats):
            used = ", ".join(f"{label} ×{n}" for label, n in sorted(self.seats[role].items()))
            lines.append(f"{'seat ' + role:<20}{used}")
        for role, chosen in sorted(self.seat_choice.items()):
            lines.append(f"{'chosen ' + role:<20}{chosen}")
        lines.append(f"{'fallbacks':<20}{self.fallbacks}")
        if self.model:
            lines.append(f"{'model answers':<20}{Tally(**self.model).line()}")
        lines += list(notes)
        lines += self.warnings()
        failed = list(failed) or self.failed_traces
        if failed:
            lines.append(f"FAILED traces ({len(failed)}), pending again next run:")
            lines += [f"  {f.get('session', '?')}: {f.get('reason', '')}" for f in failed]
        lines += self._by_trace()
        return "\n".join(lines)

    def _chunked(self) -> str:
        """How many long traces went in chunks, and how many chunks they took."""
        long = [int(a.get("chunks") or 1) for a in self.analysed if int(a.get("chunks") or 1) > 1]
        if not long:
            return ""
        return f" ({counted(len(long), 'long trace')} in {sum(long)} chunks)"

    def _by_trace(self) -> list[str]:
        """Every trace by name, after the table: analysed (kept, dropped) and unchanged."""
        lines = []
        if self.analysed:
            lines.append(f"ANALYSED traces ({len(self.analysed)}):")
            lines += [
                f"  {a.get('session', '?')}: {a.get('kept', 0)} kept, {a.get('dropped', 0)} dropped"
                + (f", {a['chunks']} chunks" if int(a.get("chunks") or 1) > 1 else "")
                for a in self.analysed
            ]
        if self.unchanged_count:
            lines.append(
                f"UNCHANGED traces ({self.unchanged_count}), since their last successful analysis:"
            )
            lines += [f"  {session}" for session in self.unchanged]
            more = self.unchanged_count - len(self.unchanged)
            if more > 0:
                lines.append(f"  … and {more} more")
        return lines

"""The Dig Report, and reading the operator's answer to it (the two-turn gate).

The report is where the run stops: no brief exists until the operator
confirms, drops or redirects candidates. Its shape is fixed so a person can
scan it and a tool can find it; every flag raised along the way is in it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agents.expedition.scotoma import PASS4_EMPTY_LINE
from agents.seats.tally import Tally
from agents.wording import counted

REPORT_OPEN = "=== DIG REPORT ==="
REPORT_CLOSE = "=== END DIG REPORT ==="
REPORT_PROMPT = "Reply to confirm, drop, or redirect any candidate before I build the brief."

_ROW_ID = re.compile(r"\brow_\d+\b")
_CONFIRM = re.compile(r"^\s*(?:confirm(?:ed)?|yes|y|ok|okay|go|approve[d]?)\b", re.IGNORECASE)
_DROP = re.compile(r"\bdrop\b(?P<rest>.*)", re.IGNORECASE | re.DOTALL)
_REDIRECT = re.compile(r"\bredirect\b[\s:,-]*(?P<text>.*)", re.IGNORECASE | re.DOTALL)
_ANCHOR = re.compile(r"\banchor\b[\s:=]+(?P<file>\S+)", re.IGNORECASE)


def _line(item: dict[str, Any], reason: str) -> str:
    return f"- {item['file']} ({item['id']}) — {reason}"


@dataclass(frozen=True)
class Dig:
    """What one round found, as the report shows it and as its data carries it."""

    direct_hits: Sequence[dict[str, Any]]
    deep_cuts: Sequence[dict[str, Any]]
    excerpts: Sequence[dict[str, Any]]
    terms: Sequence[str]
    scored: int
    batches: int
    pass4_empty: bool
    flags: Sequence[str] = ()
    redirect: str | None = None
    model: Tally | None = None  # the round's model answers, misses and rescues counted

    @property
    def voice_anchors(self) -> list[dict[str, Any]]:
        return [e for e in self.excerpts if e.get("voice_anchor")]

    def text(self) -> str:
        """The report's text, in the spec's exact frame."""
        lines = [REPORT_OPEN, "Direct hits:"]
        lines += [
            _line(hit, hit.get("why") or "scored as a direct hit") for hit in self.direct_hits
        ]
        if not self.direct_hits:
            lines.append("- none")
        lines.append("Deep cuts:")
        lines += [_line(cut, cut["connection"]) for cut in self.deep_cuts]
        if self.pass4_empty:
            lines.append(PASS4_EMPTY_LINE)
        elif not self.deep_cuts:
            lines.append("- none")
        lines.append("Voice anchors:")
        lines += [
            _line(anchor, f"first-person body prose, {anchor['first_person']} paragraphs")
            for anchor in self.voice_anchors
        ]
        if not self.voice_anchors:
            lines.append(
                "- none found: a Carbon brief will need one; point to a lived file with "
                "`bullpen expedition confirm THREAD --anchor FILE`"
            )
        lines.append(
            f"Searched: [{', '.join(self.terms)}] · {counted(self.scored, 'summary', 'summaries')} "
            f"scored across {counted(self.batches, 'batch', 'batches')}"
        )
        if self.model is not None:
            lines.append(f"Model: {self.model.line()}")
        if self.redirect:
            lines.append(f"Redirected: {self.redirect}")
        if self.flags:
            lines.append("Flags: " + " ".join(self.flags))
        lines += [REPORT_CLOSE, REPORT_PROMPT]
        return "\n".join(lines)

    def data(self) -> dict[str, Any]:
        """The machine form, for a UI or the operator's command."""
        return {
            "outcome": "dig-report",
            "direct_hits": list(self.direct_hits),
            "deep_cuts": list(self.deep_cuts),
            "voice_anchors": [
                {k: a.get(k) for k in ("id", "file", "first_person")} for a in self.voice_anchors
            ],
            "excerpts": list(self.excerpts),
            "terms": list(self.terms),
            "scored": self.scored,
            "batches": self.batches,
            "pass4_empty": self.pass4_empty,
            "flags": list(self.flags),
            **({"model": self.model.data()} if self.model is not None else {}),
        }


def tally_of(datas: Iterable[dict[str, Any]]) -> Tally:
    """Model answers counted from steps' reply data: each judgment (termgen's list, a score
    batch's or the scotoma's one) and the terms gate's misses."""
    tally = Tally()
    for data in datas:
        tally.add_all(data.get("judgments") or [])
        tally.add(data.get("judgment"))
        missed = [str(gate) for gate in data.get("gates_missed") or []]
        for number, gate in enumerate(missed):
            tally.miss(gate, rescued=number == 0 and bool(data.get("gate_rescued")))
    return tally


@dataclass(frozen=True)
class Decision:
    """What the operator said: confirm (less any drops, maybe naming the voice anchor), or redirect."""

    confirm: bool = False
    drop: tuple[str, ...] = ()
    redirect: str | None = None
    anchor: str | None = None


def _from_data(data: dict[str, Any]) -> Decision | None:
    if not any(k in data for k in ("confirm", "drop", "redirect", "anchor")):
        return None
    drop = data.get("drop") or []
    if isinstance(drop, str):
        drop = drop.split()
    redirect = data.get("redirect")
    redirect = str(redirect).strip() if redirect else None
    anchor = str(data.get("anchor") or "").strip() or None
    confirm = bool(data.get("confirm")) or (bool(drop or anchor) and not redirect)
    return Decision(
        confirm=confirm and not redirect,
        drop=tuple(map(str, drop)),
        redirect=redirect,
        anchor=None if redirect else anchor,
    )


def parse_answer(body: str, data: dict[str, Any] | None = None) -> Decision | None:
    """The operator's decision, or None when the answer says none of the three.

    Structured data wins over text. `drop` alone confirms the rest, and so
    does `anchor FILE` (the voice anchor the operator points to); a redirect
    wins over a confirm in the same answer, since it asks for a new dig.
    """
    if data:
        decided = _from_data(data)
        if decided is not None:
            return decided
    redirect = _REDIRECT.search(body)
    if redirect:
        text = redirect["text"].strip()
        return Decision(redirect=text) if text else None
    anchor_match = _ANCHOR.search(body)
    anchor = anchor_match["file"].strip(",;") if anchor_match else None
    if anchor_match:
        body = body[: anchor_match.start()] + body[anchor_match.end() :]
    drop_match = _DROP.search(body)
    drops = tuple(_tokens(drop_match["rest"])) if drop_match else ()
    if _CONFIRM.match(body) or drops or anchor:
        return Decision(confirm=True, drop=drops, anchor=anchor)
    return None


def _tokens(text: str) -> list[str]:
    """Row ids, or file names, after `drop`."""
    ids = _ROW_ID.findall(text)
    if ids:
        return ids
    return [t.strip(",;.") for t in text.split() if t.strip(",;.")]


def unknown_drops(drop: Iterable[str], shown: Iterable[dict[str, Any]]) -> list[str]:
    """Drops that name no candidate shown (by id, path or file name)."""
    names: set[str] = set()
    for item in shown:
        names.update({str(item["id"]), str(item["file"]), str(item["file"]).rsplit("/", 1)[-1]})
    return [d for d in drop if d not in names]


def is_dropped(item: dict[str, Any], drop: Iterable[str]) -> bool:
    file = str(item["file"])
    return any(d in (item["id"], file, file.rsplit("/", 1)[-1]) for d in drop)

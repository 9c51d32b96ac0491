"""The ledger: observations waiting to become memory, one line each.

An entry is one line of the ledger file::

    - [ ] negative: Pushing before the tests ran broke the build. ⟨2026-10-18 a.jsonl⟩ ⟨2026-10-19 b.md⟩

`[ ]` is open, `[x]` settled by the operator (kept as a record: never
proposed, never pruned, still corroborated). The kind is `positive`,
`negative` or `gap`; each `⟨date session⟩` is one session that saw it,
oldest first. Lines that are not entries (headings, notes) are kept as they
are. An open line without a kind or sightings, written by hand, is an entry
too: it matches items of any kind and is never pruned by age.

The id of an open line is `L-` plus the first 8 hex digits of the SHA-256
of *the line*: its UTF-8 bytes without the line terminator and without
trailing spaces or tabs. Ids are recomputed every run; appending a
sighting changes a line and so its id.

Rules, applied in item order (step 4 of the backpass):
- an item that matches an entry (same kind, token similarity at least
  `match_threshold`, best score wins, earliest line on ties) gets its
  session appended as a sighting — a *corroboration* — unless that session
  is already there (a *repeat*: one line per item and session);
- otherwise an item that a memory bullet covers is not added (*covered*);
- otherwise it becomes a new open line at the end of the file;
- then open lines from before this run are pruned when a bullet covers
  them, or when their newest sighting is more than `max_age_days` old.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date as Date
from typing import Any

from agents.backpass.memory import Bullet, covers, similarity, tokens

__all__ = ["LEDGER_HEADER", "Entry", "LedgerUpdate", "line_id", "open_entries", "parse", "update"]

KINDS = ("positive", "negative", "gap")
LEDGER_HEADER = (
    "# Ledger\n\n"
    "Observations from session traces, one line each, written by the memory backpass.\n"
    "`⟨date session⟩` marks each session that saw one. Mark a line `[x]` to settle it:\n"
    "it is then kept as a record, never proposed for memory and never pruned.\n\n"
)
_ENTRY = re.compile(r"- \[([ xX])\] (.*?)[ \t]*")
_SIGHTINGS = re.compile(r"((?:[ \t]*⟨\d{4}-\d{2}-\d{2} [^⟩]+⟩)+)$")
_SIGHTING = re.compile(r"⟨(\d{4}-\d{2}-\d{2}) ([^⟩]+)⟩")
_KIND = re.compile(r"(positive|negative|gap): (.*)")


def line_id(line: str) -> str:
    """`L-` + the first 8 hex digits of SHA-256 of the line, terminator and trailing blanks removed."""
    core = line.rstrip("\r\n").rstrip(" \t")
    return "L-" + hashlib.sha256(core.encode("utf-8")).hexdigest()[:8]


def clean(text: str) -> str:
    """One line of text that cannot be mistaken for a sighting."""
    return " ".join(text.split()).replace("⟨", "(").replace("⟩", ")")


@dataclass
class Entry:
    """One ledger entry; `line` is its text as stored, kept until the entry changes."""

    open: bool
    kind: str | None
    text: str
    sightings: list[tuple[str, str]] = field(default_factory=list)  # (date, session)
    line: str | None = None
    new: bool = False
    end: str = "\n"  # the line terminator as found

    def render(self) -> str:
        if self.line is not None:
            return self.line
        head = f"- [{' ' if self.open else 'x'}] " + (f"{self.kind}: " if self.kind else "")
        seen = "".join(f" ⟨{day} {session}⟩" for day, session in self.sightings)
        return head + self.text + seen

    @property
    def id(self) -> str:
        return line_id(self.render())

    @property
    def sessions(self) -> list[str]:
        return list(dict.fromkeys(session for _, session in self.sightings))

    def newest(self) -> str | None:
        return max((day for day, _ in self.sightings), default=None)


Part = str | Entry  # a line that is not an entry (with its terminator), or an entry


def _parse_entry(line: str) -> Entry | None:
    match = _ENTRY.fullmatch(line)
    if match is None:
        return None
    rest = match.group(2)
    sightings: list[tuple[str, str]] = []
    found = _SIGHTINGS.search(rest)
    if found:
        sightings = [(m.group(1), m.group(2)) for m in _SIGHTING.finditer(found.group(1))]
        rest = rest[: found.start()].rstrip()
    kind_match = _KIND.fullmatch(rest)
    kind, text = (kind_match.group(1), kind_match.group(2)) if kind_match else (None, rest)
    return Entry(match.group(1) == " ", kind, text, sightings, line=line)


_LINES = re.compile(r"[^\n]*\n|[^\n]+\Z")


def parse(text: str) -> list[Part]:
    """The ledger's lines: entries parsed, every other line kept verbatim (split on \\n only)."""
    parts: list[Part] = []
    for raw in _LINES.findall(text):
        body = raw.rstrip("\r\n")
        entry = _parse_entry(body)
        if entry is None:
            parts.append(raw)
        else:
            entry.line, entry.end = body, raw[len(body) :]
            parts.append(entry)
    return parts


def render(parts: Sequence[Part]) -> str:
    """The ledger text; an entry nobody changed renders exactly as it was read."""
    return "".join(part if isinstance(part, str) else part.render() + part.end for part in parts)


def open_entries(parts: Iterable[Part]) -> list[Entry]:
    return [part for part in parts if isinstance(part, Entry) and part.open]


@dataclass
class LedgerUpdate:
    """The new ledger text and what changed, counted for the funnel."""

    text: str
    original: str
    new_lines: int = 0
    corroborations: int = 0
    repeats: int = 0
    covered: int = 0
    pruned_age: list[str] = field(default_factory=list)
    pruned_covered: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.text != self.original

    def counts(self) -> dict[str, Any]:
        return {
            "new_lines": self.new_lines,
            "corroborations": self.corroborations,
            "repeats": self.repeats,
            "covered": self.covered,
            "prunes_age": len(self.pruned_age),
            "prunes_covered": len(self.pruned_covered),
            "changed": self.changed,
        }


def _best_match(
    entries: list[Entry], kind: str, wanted: frozenset[str], threshold: float
) -> Entry | None:
    best: Entry | None = None
    best_score = 0.0
    for entry in entries:
        if entry.kind not in (None, kind):
            continue
        score = similarity(tokens(entry.text), wanted)
        if score >= threshold and score > best_score:
            best, best_score = entry, score
    return best


def update(
    text: str,
    items: Iterable[dict[str, Any]],
    bullet_list: Sequence[Bullet],
    *,
    day: str,
    max_age_days: int,
    match_threshold: float,
    cover_threshold: float,
) -> LedgerUpdate:
    """Fold tonight's items (dicts with kind, text, session) into the ledger and prune it."""
    if not text.strip():
        text_in, text = text, LEDGER_HEADER
    else:
        text_in = text
    parts = parse(text)
    entries = [part for part in parts if isinstance(part, Entry)]
    result = LedgerUpdate(text="", original=text_in)
    bullet_tokens = [tokens(bullet.text) for bullet in bullet_list]
    newline = "\r\n" if "\r\n" in text else "\n"
    for item in items:
        kind, session = str(item["kind"]), clean(str(item["session"]))
        item_text = clean(str(item["text"]))
        wanted = tokens(item_text)
        match = _best_match(entries, kind, wanted, match_threshold)
        if match is not None:
            if session in match.sessions:
                result.repeats += 1
            else:
                match.sightings.append((day, session))
                match.line = None
                result.corroborations += 1
        elif any(covers(b, wanted, cover_threshold) for b in bullet_tokens):
            result.covered += 1
        else:
            entry = Entry(True, kind, item_text, [(day, session)], new=True, end=newline)
            last = parts[-1] if parts else None
            if isinstance(last, str) and not last.endswith("\n"):
                parts[-1] = last + newline
            elif isinstance(last, Entry) and not last.end:
                last.end = newline
            entries.append(entry)
            parts.append(entry)
            result.new_lines += 1
    today = Date.fromisoformat(day)
    kept: list[Part] = []
    for part in parts:
        if isinstance(part, Entry) and part.open and not part.new:
            wanted = tokens(part.text)
            newest = part.newest()
            if any(covers(b, wanted, cover_threshold) for b in bullet_tokens):
                result.pruned_covered.append(part.render())
                continue
            if newest is not None and (today - Date.fromisoformat(newest)).days > max_age_days:
                result.pruned_age.append(part.render())
                continue
        kept.append(part)
    result.text = render(kept)
    if result.text == text and text_in != text:
        result.text = text_in  # nothing happened: an empty ledger stays exactly as it was
    return result

"""The ledger: ids, one line per item and session, corroborations and prunes."""

from __future__ import annotations

import hashlib

from agents.backpass import ledger
from agents.backpass.memory import bullets

DAY = "2026-10-20"
BULLETS = bullets("- Run the linter before the tests; it is faster.\n", "PUB")
EXISTING = (
    "# Ledger\n\n"
    "- [ ] negative: Editing the generated client by hand was lost. ⟨2026-10-01 a.md⟩\n"
    "- [ ] positive: Pinning the formatter version stopped churn. ⟨2020-01-01 old.md⟩\n"
    "- [ ] positive: Run the linter before the tests, it is faster. ⟨2026-10-02 b.md⟩\n"
    "- [x] gap: Nobody knows who owns the cron jobs. ⟨2019-01-01 c.md⟩\n"
    "- [ ] a hand-written note without kind\n"
)


def _update(text: str, items: list[dict[str, str]]) -> ledger.LedgerUpdate:
    return ledger.update(
        text, items, BULLETS, day=DAY, max_age_days=90, match_threshold=0.6, cover_threshold=0.8
    )


def _item(kind: str, text: str, session: str) -> dict[str, str]:
    return {"kind": kind, "text": text, "session": session, "quote": "q"}


class TestIds:
    def test_id_is_sha256_of_the_line_without_terminator_and_trailing_blanks(self) -> None:
        """`L-` plus 8 hex of SHA-256 of the line's UTF-8, newline and trailing spaces removed."""
        line = "- [ ] gap: ⟨x⟩ & $1"
        expected = "L-" + hashlib.sha256(line.encode()).hexdigest()[:8]
        assert ledger.line_id(line + "  \t\r\n") == expected

    def test_open_entries_get_ids_in_order(self) -> None:
        """Open lines (hand-written ones too) are entries; settled `[x]` lines are not open."""
        entries = ledger.open_entries(ledger.parse(EXISTING))
        assert [e.kind for e in entries] == ["negative", "positive", "positive", None]
        assert entries[0].id == ledger.line_id(EXISTING.split("\n")[2])
        assert entries[0].sessions == ["a.md"]


class TestParse:
    def test_round_trip_is_exact(self) -> None:
        """Parsing and rendering an untouched ledger gives back the same bytes, CRLF included."""
        for text in (EXISTING, EXISTING.replace("\n", "\r\n"), EXISTING.rstrip("\n"), ""):
            assert ledger.render(ledger.parse(text)) == text

    def test_unchanged_ledger_is_byte_identical(self) -> None:
        """An update with nothing to add or prune leaves the text exactly as it was."""
        text = "# L\r\n\r\n- [ ] gap: something open ⟨2026-10-19 z.md⟩  \r\n"
        result = _update(text, [])
        assert result.text == text and not result.changed


class TestUpdate:
    def test_one_line_per_item_and_session(self) -> None:
        """A new item becomes one line; the same item again from the same session is a repeat."""
        items = [
            _item("gap", "Where are the deploy keys documented?", "s1.md"),
            _item("gap", "Where are the deploy keys documented?", "s1.md"),
        ]
        result = _update("", items)
        assert result.new_lines == 1 and result.repeats == 1 and result.corroborations == 0
        assert result.text.startswith(ledger.LEDGER_HEADER)
        assert result.text.endswith(
            "- [ ] gap: Where are the deploy keys documented? ⟨2026-10-20 s1.md⟩\n"
        )

    def test_matching_item_corroborates_instead_of_duplicating(self) -> None:
        """An item like an existing line appends its session to that line."""
        items = [_item("negative", "Editing the generated client by hand: lost.", "d.md")]
        result = _update(EXISTING, items)
        assert result.corroborations == 1 and result.new_lines == 0
        assert (
            "- [ ] negative: Editing the generated client by hand was lost. "
            "⟨2026-10-01 a.md⟩ ⟨2026-10-20 d.md⟩\n"
        ) in result.text
        assert result.text.count("generated client") == 1

    def test_second_session_in_the_same_run_corroborates_a_new_line(self) -> None:
        """Two sessions saying the same thing tonight make one line with two sightings."""
        items = [
            _item("positive", "Running the tests before pushing worked.", "x.md"),
            _item("positive", "Running the tests before pushing worked again.", "y.md"),
        ]
        result = _update("", items)
        assert (result.new_lines, result.corroborations) == (1, 1)
        assert "⟨2026-10-20 x.md⟩ ⟨2026-10-20 y.md⟩" in result.text

    def test_kind_must_match(self) -> None:
        """A positive item never corroborates a negative line."""
        items = [_item("positive", "Editing the generated client by hand was lost.", "d.md")]
        assert _update(EXISTING, items).new_lines == 1

    def test_covered_items_are_not_added(self) -> None:
        """An item a memory bullet already says is counted as covered, not written."""
        result = _update("", [_item("positive", "Run the linter before the tests.", "s.md")])
        assert (result.covered, result.new_lines) == (1, 0)

    def test_prunes_by_age_and_coverage_but_never_settled_lines(self) -> None:
        """Old open lines and covered open lines go; `[x]` lines and new lines stay."""
        result = _update(EXISTING, [])
        assert [line.split(": ")[1][:8] for line in result.pruned_age] == ["Pinning "]
        assert [line.split(": ")[1][:8] for line in result.pruned_covered] == ["Run the "]
        assert "[x] gap: Nobody knows" in result.text
        assert "hand-written note" in result.text
        assert "generated client" in result.text

    def test_corroborated_old_line_is_not_pruned_by_age(self) -> None:
        """A sighting tonight makes an old line young again."""
        items = [_item("positive", "Pinning the formatter version stopped churn.", "n.md")]
        result = _update(EXISTING, items)
        assert result.pruned_age == [] and result.corroborations == 1

    def test_special_characters_and_brackets_in_text(self) -> None:
        """Text keeps `&`, `$1`, `\\1`; sighting brackets in text cannot fake a sighting."""
        items = [_item("gap", "Why does sed & $1 \\1 fail ⟨2020-01-01 fake⟩?", "s.md")]
        result = _update("", items)
        entry = ledger.open_entries(ledger.parse(result.text))[0]
        assert entry.text == "Why does sed & $1 \\1 fail (2020-01-01 fake)?"
        assert entry.sessions == ["s.md"]

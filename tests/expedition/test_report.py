from __future__ import annotations

from agents.expedition.report import (
    REPORT_PROMPT,
    Decision,
    Dig,
    is_dropped,
    parse_answer,
    unknown_drops,
)

HIT = {"id": "row_1", "file": "voice/glue.md", "why": "names patience"}
CUT = {"id": "row_2", "file": "voice/lime.md", "connection": "lime cures slowly"}
ANCHOR = {"id": "row_2", "file": "voice/lime.md", "first_person": 3, "voice_anchor": True}
NOT_ANCHOR = {"id": "row_1", "file": "voice/glue.md", "first_person": 1, "voice_anchor": False}


def report(**overrides: object) -> str:
    fields: dict[str, object] = dict(
        direct_hits=[HIT],
        deep_cuts=[CUT],
        excerpts=[NOT_ANCHOR, ANCHOR],
        terms=["cure", "frost"],
        scored=23,
        batches=3,
        pass4_empty=False,
        flags=[],
    )
    fields.update(overrides)
    return Dig(**fields).text()  # type: ignore[arg-type]


class TestDigReport:
    def test_exact_frame(self) -> None:
        """The report has the spec's sections in order, the Searched line and the closing prompt."""
        lines = report().splitlines()
        assert lines == [
            "=== DIG REPORT ===",
            "Direct hits:",
            "- voice/glue.md (row_1) — names patience",
            "Deep cuts:",
            "- voice/lime.md (row_2) — lime cures slowly",
            "Voice anchors:",
            "- voice/lime.md (row_2) — first-person body prose, 3 paragraphs",
            "Searched: [cure, frost] · 23 summaries scored across 3 batches",
            "=== END DIG REPORT ===",
            REPORT_PROMPT,
        ]

    def test_pass4_empty_and_flags_are_shown(self) -> None:
        """An empty scotoma pick says so, and every flag is listed inside the report."""
        text = report(
            deep_cuts=[], pass4_empty=True, flags=["[TERM_FANOUT_WEAK]", "[KB_FILE_MISSING:x.md]"]
        )
        assert "Deep cuts:\nPass 4 empty; pattern may be new to corpus.\n" in text
        assert "Flags: [TERM_FANOUT_WEAK] [KB_FILE_MISSING:x.md]\n=== END DIG REPORT ===" in text

    def test_one_batch_is_singular(self) -> None:
        """One batch of scores is '1 batch', not '1 batches'."""
        assert "· 1 summary scored across 1 batch\n" in report(scored=1, batches=1)


class TestAnswers:
    def test_confirm(self) -> None:
        """'confirm' and 'yes' confirm everything."""
        assert parse_answer("confirm") == Decision(confirm=True)
        assert parse_answer("Yes, go ahead") == Decision(confirm=True)

    def test_drop_confirms_the_rest(self) -> None:
        """'confirm, drop row_5 row_7' and a bare 'drop row_5' confirm the others."""
        assert parse_answer("confirm, drop row_5 row_7") == Decision(
            confirm=True, drop=("row_5", "row_7")
        )
        assert parse_answer("drop row_5") == Decision(confirm=True, drop=("row_5",))
        assert parse_answer("drop glue.md") == Decision(confirm=True, drop=("glue.md",))

    def test_redirect_wins(self) -> None:
        """'redirect <text>' asks for a new dig, even alongside other words."""
        assert parse_answer("redirect: look at seasonal work") == Decision(
            redirect="look at seasonal work"
        )

    def test_structured_data(self) -> None:
        """The data form is read before the text."""
        assert parse_answer("", {"confirm": True, "drop": ["row_3"]}) == Decision(
            confirm=True, drop=("row_3",)
        )
        assert parse_answer("confirm", {"redirect": "kilns"}) == Decision(redirect="kilns")

    def test_anything_else_is_no_decision(self) -> None:
        """Chat that says none of the three is not taken as a confirmation."""
        assert parse_answer("hmm, interesting, let me think") is None
        assert parse_answer("redirect") is None

    def test_drops_are_checked_against_what_was_shown(self) -> None:
        """A drop may name an id, a path or a file name; anything else is unknown."""
        assert unknown_drops(["row_1", "voice/lime.md", "glue.md", "row_9"], [HIT, CUT]) == [
            "row_9"
        ]
        assert is_dropped(HIT, ["glue.md"]) and not is_dropped(CUT, ["row_1"])

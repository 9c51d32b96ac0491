"""The quote check: whitespace-folded substring, nothing more forgiving."""

from __future__ import annotations

from agents.backpass.quotes import check_items, fold, quote_found

TRACE = "line one & $1\n   line\ttwo \\1 {}\n\nThe Tests passed."


class TestQuoteCheck:
    def test_fold_collapses_all_whitespace(self) -> None:
        """Runs of spaces, tabs and newlines become one space; ends are trimmed."""
        assert fold("  a \n\t b  \r\n c ") == "a b c"

    def test_rewrapped_quote_is_found(self) -> None:
        """A quote that differs from the trace only in whitespace is kept."""
        assert quote_found("& $1 line two \\1", fold(TRACE))

    def test_changed_words_are_not_found(self) -> None:
        """Case, punctuation and words must match exactly."""
        folded = fold(TRACE)
        assert not quote_found("the tests passed.", folded)
        assert not quote_found("The Tests passed!", folded)
        assert not quote_found("line one and $1", folded)

    def test_empty_quote_is_missing(self) -> None:
        """An empty or blank quote counts as missing."""
        assert not quote_found("", fold(TRACE))
        assert not quote_found(" \n ", fold(TRACE))

    def test_check_items_splits_and_counts(self) -> None:
        """check_items keeps the found quotes and counts the rest as dropped."""
        items = [
            {"text": "a", "quote": "The Tests passed."},
            {"text": "b", "quote": "made up"},
            {"text": "c", "quote": ""},
            {"text": "d"},
        ]
        result = check_items(items, TRACE)
        assert [i["text"] for i in result.kept] == ["a"]
        assert len(result.dropped) == 3
        assert result.returned == 4

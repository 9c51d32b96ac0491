from __future__ import annotations

from agents.expedition.kb import IndexRow
from agents.expedition.retrieve import matched_terms, retrieve, structural_match


def row(n: int, summary: str, keypoints: str = "", **cells: str) -> IndexRow:
    return IndexRow(id=f"row_{n}", file=f"f{n}.md", summary=summary, keypoints=keypoints, **cells)


class TestMatching:
    def test_case_insensitive_substring_of_summary_and_keypoints(self) -> None:
        """Terms match inside words and across case, in the summary or the keypoints."""
        r = row(1, "The Glue CURED overnight", "clamps; frost-cracked")
        assert matched_terms(r, ["cure", "frost", "hessian", "glue cured"]) == [
            "cure",
            "frost",
            "glue cured",
        ]

    def test_tags_are_not_searched(self) -> None:
        """A term found only in the tags column matches nothing."""
        assert matched_terms(row(1, "a wall", "", tags="mortar"), ["mortar"]) == []

    def test_structural_match_needs_every_hint_given(self) -> None:
        """Archetype and monomyth must both match when both are given; none given, no match."""
        r = row(1, "x", category="Workshop; Mentor", monomyth="04 - Meeting the Mentor")
        assert structural_match(r, "mentor", "04")
        assert structural_match(r, None, "Meeting the Mentor")
        assert not structural_match(r, "mentor", "08 - The Ordeal")
        assert not structural_match(r, None, None)

    def test_archetype_column_counts(self) -> None:
        """An archetype column matches the archetype hint like the category does."""
        assert structural_match(row(1, "x", archetype="Trickster"), "trickster", None)


class TestRetrieve:
    def test_prescore_is_terms_plus_two_for_structure(self) -> None:
        """Prescore counts matched terms and adds two for a structural match."""
        rows = [row(1, "cure and frost"), row(2, "cure", category="Steward"), row(3, "nothing")]
        found = retrieve(rows, ["cure", "frost"], archetype="steward", monomyth=None)
        assert [(c["id"], c["prescore"]) for c in found] == [("row_2", 3), ("row_1", 2)]

    def test_cap_keeps_the_highest_prescores_in_index_order(self) -> None:
        """Only `cap` rows survive: best prescore first, earlier rows first among equals."""
        rows = [row(i, "cure" + (" frost" if i in (4, 7) else "")) for i in range(1, 9)]
        found = retrieve(rows, ["cure", "frost"], archetype=None, monomyth=None, cap=4)
        assert [c["id"] for c in found] == ["row_4", "row_7", "row_1", "row_2"]

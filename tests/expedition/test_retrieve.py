from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agents.expedition.kb import IndexRow
from agents.expedition.retrieve import matched_terms, retrieve, structural_match
from agents.expedition.steps import retrieve_candidates
from agents.runtime.step import Reply
from room.errors import StepFailed
from tests.expedition.conftest import MakeKb
from tests.expedition.sim import ask, step_context, write_home
from tests.expedition.texts import document, index, paragraph


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


def retrieve_step(tmp_path: Path, kb: Path, terms: list[str]) -> Reply:
    """Step 2 as the retriever nick runs it, against the knowledge base `kb`."""
    home = write_home(tmp_path / "home", kb)
    context = {"kb": str(kb), "archetype_primary": None, "monomyth_hint": None}
    message = ask({"context": context, "terms": terms}, to="retriever")
    return asyncio.run(retrieve_candidates(message, step_context(home, nick="retriever")))


class TestStep:
    def test_unclosed_fence_of_a_matching_row_is_flagged_and_left_out(
        self, tmp_path: Path, make_kb: MakeKb
    ) -> None:
        """A matching file that never closes its frontmatter is flagged by name in step 2 and dropped."""
        kb = make_kb(
            {
                "a.md": document("Glue body."),
                "open.md": "---\nsummary: s\nno closing fence\n" + paragraph(40),
                "quiet.md": "---\nsummary: s\nno closing fence either\n",
            },
            index(
                [
                    ("a.md", "Glue left overnight", "clamps"),
                    ("open.md", "Varnish left overnight", "thin coats"),
                    ("quiet.md", "Nothing to find here", "none"),
                ]
            ),
        )
        reply = retrieve_step(tmp_path, kb, ["overnight"])
        assert reply.data is not None
        assert reply.data["flags"] == ["[KB_FRONTMATTER_UNCLOSED:open.md]"]
        assert [c["file"] for c in reply.data["candidates"]] == ["a.md"]

    def test_nothing_left_after_the_fence_check_fails_naming_the_files(
        self, tmp_path: Path, make_kb: MakeKb
    ) -> None:
        """When every matching row's file is unclosed, step 2 fails and says which files."""
        kb = make_kb(
            {"open.md": "---\nsummary: s\n" + paragraph(40)},
            index([("open.md", "Varnish left overnight", "thin coats")]),
        )
        with pytest.raises(StepFailed, match=r"\[KB_FRONTMATTER_UNCLOSED:open\.md\]"):
            retrieve_step(tmp_path, kb, ["overnight"])

    def test_every_file_missing_names_the_first_ten_and_counts_the_rest(
        self, tmp_path: Path, make_kb: MakeKb
    ) -> None:
        """With no indexed file present, the failure names missing files and how many more."""
        rows = [(f"gone{n}.md", "Glue left overnight", "clamps") for n in range(1, 13)]
        kb = make_kb({}, index(rows))
        with pytest.raises(StepFailed) as caught:
            retrieve_step(tmp_path, kb, ["overnight"])
        message = caught.value.message
        assert "[KB_FILE_MISSING:gone1.md]" in message
        assert "[KB_FILE_MISSING:gone10.md]" in message
        assert "gone11.md" not in message and "and 2 more" in message

from __future__ import annotations

from pathlib import Path

import pytest

from agents.expedition.kb import (
    UnclosedFrontmatter,
    load_index,
    parse_index,
    read_document,
    resolve,
    split_cells,
    split_frontmatter,
)
from room.errors import StepFailed
from tests.expedition.conftest import MakeKb
from tests.expedition.texts import document


class TestCells:
    def test_outer_pipes_are_optional(self) -> None:
        """A row reads the same with or without its leading and trailing pipes."""
        assert split_cells("| a | b |") == split_cells("a | b") == ["a", "b"]

    def test_escaped_pipe_stays_in_its_cell(self) -> None:
        """`\\|` is a literal pipe inside a cell, not a column break."""
        assert split_cells(r"| x.md | before \| after | k |") == ["x.md", "before | after", "k"]


class TestIndex:
    def test_any_column_order_extra_columns_and_archetype(self) -> None:
        """Columns are found by name, extras are ignored, and an archetype column is kept."""
        text = (
            "# Index\n\nSome words first.\n\n"
            " | Monomyth | extra | File | Summary | Keypoints | Tags | Category | Archetype |\n"
            " |:--|--|--|--|--|--|--|--:|\n"
            " | 02 - Call | zz |  a.md  |  A summary  | k1<br>k2 | t | Field | Mentor |\n"
        )
        row = parse_index(text).rows[0]
        assert (row.id, row.file, row.summary, row.keypoints) == (
            "row_1",
            "a.md",
            "A summary",
            "k1; k2",
        )
        assert (row.category, row.monomyth, row.archetype) == ("Field", "02 - Call", "Mentor")

    @pytest.mark.parametrize("name", ["Key Points", "key_points", "Keypoints", "key-points"])
    def test_header_names_ignore_case_spaces_underscores_and_hyphens(self, name: str) -> None:
        """`Key Points`, `key_points`, `Keypoints` and `key-points` all name the keypoints column."""
        text = (
            f"| File | Summary | {name} | Tags | Category | Monomyth |\n|-|-|-|-|-|-|\n"
            "| a.md | s | kp | t | c | m |\n"
        )
        assert parse_index(text).rows[0].keypoints == "kp"

    def test_file_cells_as_links_or_code_name_the_file(self) -> None:
        """A file cell written as a Markdown link or in backticks is the file it names."""
        text = (
            "| file | summary | keypoints | tags | category | monomyth |\n|-|-|-|-|-|-|\n"
            "| [a](a.md) | s | k | t | c | m |\n"
            "| `notes/b.md` | s | k | t | c | m |\n"
            "| [`c.md`](Corpus/c.md) | s | k | t | c | m |\n"
            "| [d](<notes/d e.md>) | s | k | t | c | m |\n"
            '| [f](notes/f%20g.md "title") | s | k | t | c | m |\n'
        )
        assert [r.file for r in parse_index(text).rows] == [
            "a.md",
            "notes/b.md",
            "Corpus/c.md",
            "notes/d e.md",
            "notes/f g.md",
        ]

    def test_missing_columns_are_named(self) -> None:
        """An index without the required columns fails with their names and the full list."""
        with pytest.raises(StepFailed, match="lacks the column\\(s\\) keypoints, monomyth"):
            parse_index(
                "| file | summary | tags | category |\n|---|---|---|---|\n| a | b | c | d |\n"
            )

    def test_no_table_fails_with_what_to_write(self) -> None:
        """Text with no index table fails and says which columns a table needs."""
        with pytest.raises(StepFailed, match="no Markdown table"):
            parse_index("just prose, no table here\n")

    def test_row_without_file_is_flagged_and_numbering_holds(self) -> None:
        """A row with an empty file cell is flagged by id; later rows keep their numbers."""
        text = (
            "| file | summary | keypoints | tags | category | monomyth |\n|-|-|-|-|-|-|\n"
            "|  | s | k | t | c | m |\n| b.md | s | k | t | c | m |\n"
        )
        index = parse_index(text)
        assert index.flags == ["[KB_ROW_NO_FILE:row_1]"]
        assert [r.id for r in index.rows] == ["row_2"]

    def test_unreadable_index_fails_naming_the_folder(self, tmp_path: Path) -> None:
        """A folder without corpus_index.md fails, naming the folder and the setting to fix."""
        with pytest.raises(StepFailed, match=r"has no corpus_index\.md"):
            load_index(tmp_path)

    def test_demo_index_lists_files_that_exist(self, demo_kb: Path) -> None:
        """The sample index has 40+ rows, each resolving to a file with a lived or guidance role."""
        index = load_index(demo_kb)
        assert len(index.rows) >= 40 and not index.flags
        for row in index.rows:
            document, flag = read_document(demo_kb, row.file)
            assert flag is None and document is not None, row.file
            assert document.role in {"lived", "guidance"}, row.file


class TestFiles:
    def test_corpus_prefix_is_tolerated(self, make_kb: MakeKb) -> None:
        """`Corpus/x.md` finds `x.md` in the knowledge base, as the seed's layout does."""
        kb = make_kb({"notes/x.md": "hello"}, "")
        assert resolve(kb, "Corpus/notes/x.md") == (kb / "notes/x.md").resolve()

    def test_paths_never_leave_the_knowledge_base(self, make_kb: MakeKb, tmp_path: Path) -> None:
        """A row pointing outside the folder resolves to nothing."""
        (tmp_path / "secret.md").write_text("no")
        kb = make_kb({}, "")
        assert resolve(kb, "../secret.md") is None

    def test_body_is_below_the_fence(self) -> None:
        """The frontmatter and the body split at the closing fence."""
        front, body = split_frontmatter("---\nsummary: s\n---\nThe body.\n")
        assert front == "summary: s\n" and body == "The body.\n"

    def test_unclosed_fence_raises(self) -> None:
        """A fence that never closes is an error, not a file that is all frontmatter."""
        with pytest.raises(UnclosedFrontmatter):
            split_frontmatter("---\nsummary: s\nThe body, no fence.\n")

    def test_bad_files_become_flags_naming_them(self, make_kb: MakeKb) -> None:
        """A missing file and an unclosed fence each become a flag with the file's name."""
        kb = make_kb({"open.md": "---\nsummary: s\nbody\n", "ok.md": document("Body.")}, "")
        assert read_document(kb, "gone.md") == (None, "[KB_FILE_MISSING:gone.md]")
        assert read_document(kb, "open.md") == (None, "[KB_FRONTMATTER_UNCLOSED:open.md]")
        good, flag = read_document(kb, "ok.md")
        assert (
            flag is None and good is not None and good.role == "lived" and good.summary == "A note."
        )

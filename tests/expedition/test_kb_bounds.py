"""Knowledge-base and blaze files are parsed within bounds: no YAML aliases, typed fields, a size cap."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agents.expedition.blaze import BlazeError, read_blaze
from agents.expedition.kb import MAX_KB_FILE_BYTES, check_file, read_document
from tests.expedition.conftest import MakeKb


def alias_bomb(role: str = "lived") -> str:
    """Nine levels of nine aliases: about 1 KB that expands to 9**9 strings when turned to text."""
    lines = ["---", 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        refs = ", ".join([f"*l{level - 1}"] * 9)
        lines.append(f"l{level}: &l{level} [{refs}]")
    lines += [f"role: {role}", "summary: *l9", "---", "The body.", ""]
    text = "\n".join(lines)
    assert len(text) < 1100
    return text


def sparse(path: Path, size: int) -> Path:
    """A file of `size` bytes that costs no disk: its size is what `stat` reports."""
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


class TestKbFrontmatter:
    def test_an_alias_bomb_is_a_flag_naming_the_file_at_once(self, make_kb: MakeKb) -> None:
        """A 1 KB frontmatter of nested aliases is refused as invalid, without expanding it."""
        kb = make_kb({"bomb.md": alias_bomb()}, "")
        started = time.monotonic()
        assert read_document(kb, "bomb.md") == (None, "[KB_FRONTMATTER_INVALID:bomb.md]")
        assert time.monotonic() - started < 1.0

    @pytest.mark.parametrize("front", ["role: [lived]", "role: 7", "summary: {a: b}"])
    def test_a_field_that_is_not_text_is_a_flag_naming_the_file(
        self, make_kb: MakeKb, front: str
    ) -> None:
        """A role or summary that is a list, a number or a mapping is refused, never str()-ed."""
        kb = make_kb({"odd.md": f"---\n{front}\n---\nBody.\n"}, "")
        assert read_document(kb, "odd.md") == (None, "[KB_FRONTMATTER_INVALID:odd.md]")

    def test_a_file_over_the_limit_is_refused_from_its_size(self, make_kb: MakeKb) -> None:
        """A knowledge-base file past MAX_KB_FILE_BYTES is flagged by both checks, unread."""
        kb = make_kb({}, "")
        sparse(kb / "huge.md", MAX_KB_FILE_BYTES + 1)
        assert check_file(kb, "huge.md") == "[KB_FILE_TOO_LARGE:huge.md]"
        assert read_document(kb, "huge.md") == (None, "[KB_FILE_TOO_LARGE:huge.md]")


class TestBlazeFrontmatter:
    def test_an_alias_bomb_blaze_is_refused_naming_the_file(self, tmp_path: Path) -> None:
        """A blaze whose frontmatter uses aliases is an error that names the file and the alias."""
        path = tmp_path / "bomb.md"
        path.write_text(alias_bomb("guidance"), encoding="utf-8")
        with pytest.raises(BlazeError, match=r"bomb\.md.*alias \*l0"):
            read_blaze(path)

    def test_a_role_that_is_not_text_is_refused_naming_the_file(self, tmp_path: Path) -> None:
        """`role: [guidance]` is an error naming the file, not a list turned into text."""
        path = tmp_path / "odd.md"
        path.write_text("---\nrole: [guidance]\n---\nBody.\n", encoding="utf-8")
        with pytest.raises(BlazeError, match=r"odd\.md: role must be text"):
            read_blaze(path)

    def test_a_blaze_over_the_limit_is_refused_from_its_size(self, tmp_path: Path) -> None:
        """A blaze larger than MAX_KB_FILE_BYTES is refused with its size, before it is read."""
        path = sparse(tmp_path / "huge.md", MAX_KB_FILE_BYTES + 1)
        with pytest.raises(BlazeError, match=f"{os.path.getsize(path)} bytes"):
            read_blaze(path)

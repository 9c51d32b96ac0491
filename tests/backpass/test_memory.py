"""memory.md bullets, their ids, coverage and edits."""

from __future__ import annotations

from agents.backpass.memory import apply_edits, bullets, covered_by, covers, similarity, tokens
from agents.backpass.schemas import Edit

MEMORY = """# Memory

Intro line - not a bullet.

- First bullet.
  continued here
  - a sub-point
* Second bullet
+ Third & $1 bullet

```
- not a bullet, in a fence
```

## Later
- Fourth bullet
---
"""


def _edit(**fields: object) -> Edit:
    return Edit.model_validate({"repo": "public", **fields})


class TestBullets:
    def test_numbered_in_order_with_continuations(self) -> None:
        """Column-0 bullets are numbered; indented lines belong to the bullet; fences are skipped."""
        found = bullets(MEMORY, "PUB")
        assert [b.id for b in found] == ["PUB-001", "PUB-002", "PUB-003", "PUB-004"]
        assert found[0].text == "First bullet. continued here - a sub-point"
        assert found[2].text == "Third & $1 bullet"
        assert found[3].text == "Fourth bullet"

    def test_empty_file_has_no_bullets(self) -> None:
        """An empty memory has no bullets."""
        assert bullets("", "PRV") == []


class TestCoverage:
    def test_tokens_drop_stop_words_and_plurals(self) -> None:
        """Tokens are lowercase content words, a plural s dropped; `not` is kept."""
        assert tokens("Do NOT push the Tests to main!") == {"not", "push", "test", "main"}

    def test_covers_is_containment(self) -> None:
        """A bullet covers a text when most of the text's tokens are in it."""
        bullet = tokens("Run the linter before the tests; it is faster.")
        assert covers(bullet, tokens("run linter before tests"), 0.8)
        assert not covers(bullet, tokens("run the formatter before the tests"), 0.8)
        assert not covers(bullet, frozenset(), 0.8)

    def test_similarity_is_jaccard(self) -> None:
        """Similarity is shared tokens over all tokens."""
        assert similarity(frozenset("ab"), frozenset("bc")) == 1 / 3
        assert similarity(frozenset(), frozenset()) == 0.0

    def test_covered_by_names_the_bullet(self) -> None:
        """covered_by returns the first covering bullet."""
        found = bullets(MEMORY, "PUB")
        assert covered_by("the fourth bullet", found, 0.8) == found[3]
        assert covered_by("something else entirely", found, 0.8) is None


class TestApplyEdits:
    def test_add_replace_remove_keep_original_ids(self) -> None:
        """Edits refer to the original numbering even after earlier edits moved lines."""
        edits = [
            _edit(op="remove", bullet="PUB-001"),
            _edit(op="replace", bullet="PUB-002", text="Second, rewritten & $1"),
            _edit(op="add", bullet="PUB-003", text="After third"),
            _edit(op="add", text="At the end of the bullets"),
        ]
        texts = apply_edits(MEMORY, "PUB", edits)
        assert len(texts) == 4
        assert "First bullet" not in texts[0] and "a sub-point" not in texts[0]
        final = texts[-1]
        assert "* Second, rewritten & $1\n+ Third & $1 bullet\n+ After third\n" in final
        assert final.endswith("- Fourth bullet\n- At the end of the bullets\n---\n")
        assert "- not a bullet, in a fence" in final

    def test_add_to_empty_memory(self) -> None:
        """Adding to a memory with no bullets appends at the end."""
        assert apply_edits("# Title\n", "PRV", [_edit(repo="private", op="add", text="x")]) == [
            "# Title\n- x\n"
        ]

    def test_crlf_and_missing_final_newline(self) -> None:
        """A CRLF file gets CRLF lines; a last line without a newline is terminated."""
        text = "- a\r\n- b"
        out = apply_edits(text, "PUB", [_edit(op="add", bullet="PUB-001", text="c")])
        assert out == ["- a\r\n- c\r\n- b\r\n"]

"""What a blaze file must be, checked the same way before posting and in step 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.expedition.blaze import BlazeError, read_blaze
from tests.expedition.conftest import DEMO_KB


def blaze(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "blaze.md"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


class TestGoodBlazes:
    def test_the_demo_blaze_gives_claims_and_phrases(self) -> None:
        """The shipped blaze's frontmatter claims, body claims and named phrases are all read."""
        read = read_blaze(DEMO_KB / "blaze-example.md")
        assert "Waiting is a job with its own tools, not an absence of work." in read.claims
        assert "watched pot" in read.phrases and read.path == DEMO_KB / "blaze-example.md"

    def test_a_blaze_without_frontmatter_or_role_is_guidance(self, tmp_path: Path) -> None:
        """No frontmatter, or no role in it: a file given as a blaze is guidance."""
        plain = read_blaze(blaze(tmp_path, "# Claims\n\n- Waiting is work.\n"))
        assert plain.claims == ["Waiting is work."]
        bare = read_blaze(blaze(tmp_path, "---\nclaims:\n  - Waiting is work.\n---\nBody.\n"))
        assert bare.claims == ["Waiting is work."]

    def test_empty_lists_and_blank_keys_are_fine(self, tmp_path: Path) -> None:
        """`claims:` left blank or `[]` is no claims, not an error."""
        read = read_blaze(blaze(tmp_path, "---\nrole: Guidance\nclaims:\nphrases: []\n---\nx\n"))
        assert read.claims == [] and read.phrases == []


class TestBadBlazes:
    @pytest.mark.parametrize(
        ("content", "said"),
        [
            (b"\x89PNG\r\n\x1a\n\x00\xe3\x81\xff", "is not UTF-8 text"),
            ("---\nrole: lived\n---\nI waited.\n", "says role: lived; a blaze is guidance"),
            ("---\nrole: guidance\nclaims: Waiting is work.\n---\n", "claims must be a list"),
            ("---\nclaims: 3\n---\n", "claims must be a list"),
            ("---\nopen_questions: {a: b}\n---\n", "open_questions must be a list"),
            ("---\nphrases:\n  - {a: b}\n---\n", "phrases item 1 is not plain text"),
            ("---\nclaims: [unclosed\n---\n", "frontmatter is not valid YAML"),
            ("---\n- just\n- a list\n---\n", "frontmatter is not a mapping"),
            ("---\nrole: guidance\nno closing fence\n", "never closes it"),
        ],
        ids=[
            "binary",
            "lived",
            "claims-a-string",
            "claims-a-number",
            "questions-a-mapping",
            "phrase-a-mapping",
            "broken-yaml",
            "frontmatter-a-list",
            "unclosed",
        ],
    )
    def test_each_problem_names_the_file_and_the_fix(
        self, tmp_path: Path, content: str | bytes, said: str
    ) -> None:
        """Every refusal names the blaze file and says what it must be instead."""
        path = blaze(tmp_path, content)
        with pytest.raises(BlazeError) as caught:
            read_blaze(path)
        assert said in caught.value.message and str(path) in caught.value.message

    def test_binary_says_utf8_markdown(self, tmp_path: Path) -> None:
        """A binary file is named, and told apart from a decoding traceback."""
        path = blaze(tmp_path, b"\x00\xe3\x81\xff" * 4)
        with pytest.raises(BlazeError, match="must be a UTF-8 Markdown file") as caught:
            read_blaze(path)
        assert "UnicodeDecodeError" not in caught.value.message

    @pytest.mark.parametrize(
        ("make", "said"),
        [
            (lambda tmp: tmp / "gone.md", "does not exist"),
            (lambda tmp: tmp, "is a folder"),
        ],
        ids=["missing", "folder"],
    )
    def test_missing_or_a_folder(self, tmp_path: Path, make: object, said: str) -> None:
        """A path that is not there, or is a folder, says so and how to go on."""
        path = make(tmp_path)  # type: ignore[operator]
        with pytest.raises(BlazeError, match=said):
            read_blaze(path)

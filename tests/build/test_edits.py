"""The code seat's answer format and the repository view: pure logic, real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.build.edits import CodeAnswer, EditRefused, FileChange, LineEdit, apply_answer
from agents.build.repomap import definitions, imported_files, view_repo
from agents.roots import OutsideRoot

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"


def _repo(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/calc.py").write_text(BUGGY)
    (tmp_path / "other.py").write_text("class Thing:\n    def go(self):\n        pass\n")
    (tmp_path / "tests").mkdir()
    return tmp_path


class TestApply:
    def test_numbered_lines_whose_old_text_matches_are_replaced(self, tmp_path: Path) -> None:
        """Lines start..end, copied exactly as old, are replaced by new; the rest is kept."""
        root = _repo(tmp_path)
        edit = LineEdit(path="pkg/calc.py", start=1, end=2,
                        old="def add(a, b):\n    return a - b",
                        new="def add(a, b):\n    return a + b")  # fmt: skip
        assert apply_answer(root, CodeAnswer(edits=[edit]), {"pkg/calc.py"}) == ["pkg/calc.py"]
        assert (root / "pkg/calc.py").read_text() == BUGGY.replace("a - b", "a + b", 1)

    def test_several_edits_of_one_file_use_the_numbers_as_shown(self, tmp_path: Path) -> None:
        """Line numbers are the shown file's: a first edit that grows the file does not shift
        a later one; an empty new deletes its lines; CRLF lines keep their endings."""
        root = _repo(tmp_path)
        grow = LineEdit(path="pkg/calc.py", start=2, end=2, old="    return a - b",
                        new="    total = a + b\n    return total")  # fmt: skip
        fix = LineEdit(
            path="pkg/calc.py", start=6, end=6, old="    return a - b", new="    return a - b  # ok"
        )
        drop = LineEdit(path="pkg/calc.py", start=3, end=4, old="\n", new="")
        apply_answer(root, CodeAnswer(edits=[fix, grow, drop]), {"pkg/calc.py"})
        assert (root / "pkg/calc.py").read_text() == (
            "def add(a, b):\n    total = a + b\n    return total\ndef sub(a, b):\n"
            "    return a - b  # ok\n"
        )
        (root / "win.py").write_bytes(b"a = 1\r\nb = 2\r\n")
        one = LineEdit(path="win.py", start=2, end=2, old="b = 2", new="b = 3")
        apply_answer(root, CodeAnswer(edits=[one]), {"win.py"})
        assert (root / "win.py").read_bytes() == b"a = 1\r\nb = 3\r\n"

    @pytest.mark.parametrize(
        ("start", "end", "old", "why"),
        [
            (6, 6, "    return a * b", "old is not what those lines say (they read '    return a - b')"),
            (6, 7, "    return a - b", "the file has 6 lines"),
            (1, 1, "def add(a, b):", "overlaps edit 1 (lines 1-2)"),
        ],
    )  # fmt: skip
    def test_an_edit_that_does_not_apply_writes_nothing_of_the_turn(
        self, tmp_path: Path, start: int, end: int, old: str, why: str
    ) -> None:
        """A wrong old text, a line past the end, or an overlap refuses the whole answer, the
        good edits too, and says which edit and why."""
        root = _repo(tmp_path)
        good = LineEdit(path="pkg/calc.py", start=1, end=2,
                        old="def add(a, b):\n    return a - b", new="pass")  # fmt: skip
        other = LineEdit(
            path="other.py", start=3, end=3, old="        pass", new="        return 1"
        )
        bad = LineEdit(path="pkg/calc.py", start=start, end=end, old=old, new="x")
        with pytest.raises(EditRefused) as caught:
            apply_answer(root, CodeAnswer(edits=[good, other, bad]), {"pkg/calc.py", "other.py"})
        assert why in caught.value.message, caught.value.message
        assert f"edit 3 (pkg/calc.py, lines {start}-{end})" in caught.value.message
        assert (root / "other.py").read_text().endswith("pass\n")
        assert (root / "pkg/calc.py").read_text() == BUGGY

    def test_only_shown_files_are_edited_or_replaced_and_new_files_are_welcome(
        self, tmp_path: Path
    ) -> None:
        """A file not shown cannot be edited nor overwritten blind; a new file can be made;
        the spec is protected; a file given whole is not also edited by line."""
        root = _repo(tmp_path)
        blind = CodeAnswer(files=[FileChange(path="pkg/calc.py", content="guess\n")])
        with pytest.raises(EditRefused, match="was not shown to you in full"):
            apply_answer(root, blind, set())
        line = LineEdit(path="pkg/calc.py", start=1, end=1, old="def add(a, b):", new="b")
        with pytest.raises(EditRefused, match="not shown to you in full"):
            apply_answer(root, CodeAnswer(edits=[line]), set())
        spec = CodeAnswer(files=[FileChange(path="tests/test_x.py", content="")])
        with pytest.raises(EditRefused, match="the spec is the contract"):
            apply_answer(root, spec, set(), {"tests/test_x.py"})
        both = CodeAnswer(files=[FileChange(path="pkg/calc.py", content="x\n")], edits=[line])
        with pytest.raises(EditRefused, match="replaces this file whole"):
            apply_answer(root, both, {"pkg/calc.py"})
        new = CodeAnswer(files=[FileChange(path="pkg/new.py", content="X = 1\n")])
        assert apply_answer(root, new, set()) == ["pkg/new.py"]
        assert (root / "pkg/calc.py").read_text() == BUGGY

    def test_an_answer_that_changes_nothing_is_invalid(self) -> None:
        """No edit and no file, or edits whose new text is their old text: the judge's
        validation refuses it (and retries with why)."""
        with pytest.raises(ValueError, match="changes nothing"):
            CodeAnswer.model_validate({"edits": [], "files": []})
        same = {"path": "a.py", "start": 1, "end": 1, "old": "x = 1", "new": "x = 1"}
        with pytest.raises(ValueError, match="each edit's new text is its old text"):
            CodeAnswer.model_validate({"edits": [same], "files": []})
        with pytest.raises(ValueError, match="end 1 is before start 2"):
            CodeAnswer.model_validate({"edits": [{**same, "start": 2, "new": "x = 2"}]})

    def test_a_path_out_of_the_clone_is_a_rule_broken(self, tmp_path: Path) -> None:
        root = _repo(tmp_path)
        out = CodeAnswer(edits=[LineEdit(path="../x.py", start=1, end=1, old="a", new="b")])
        with pytest.raises(OutsideRoot):
            apply_answer(root, out, {"../x.py"})


class TestView:
    def test_the_map_lists_definitions_and_the_imports_are_shown_in_full(
        self, tmp_path: Path
    ) -> None:
        root = _repo(tmp_path)
        spec = "from pkg.calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"
        (root / "tests/test_calc.py").write_text(spec)
        assert imported_files(root, "tests/test_calc.py", spec) == ["pkg/calc.py"]
        view = view_repo(root, "tests/test_calc.py", spec, [], 4000)
        assert view.files == {"pkg/calc.py": BUGGY} and view.left_out == []
        assert "pkg/calc.py (" in view.map_text and "def add, def sub" in view.map_text
        assert "other.py" in view.map_text and "class Thing(go)" in view.map_text

    def test_what_the_budget_cannot_hold_is_named(self, tmp_path: Path) -> None:
        root = _repo(tmp_path)
        (root / "pkg/calc.py").write_text(BUGGY * 200)
        view = view_repo(root, "tests/test_calc.py", "import pkg.calc\n", [], 500)
        assert "pkg/calc.py" not in view.files
        assert any("pkg/calc.py" in what and "budget" in what for what in view.left_out)

    @pytest.mark.parametrize(
        ("name", "text", "found"),
        [
            ("a.go", "package a\n\nfunc Add(a, b int) int {}\ntype T struct{}\n",
             ["func Add", "type T"]),
            ("a.js", "export function draw() {}\nconst speed = 2;\nexports.add = 1;\n",
             ["draw", "speed", "add"]),
            ("a.py", "def f(:\n", ["(does not parse)"]),
        ],
    )  # fmt: skip
    def test_definitions_by_language(self, name: str, text: str, found: list[str]) -> None:
        assert definitions(name, text) == found


class TestPrompt:
    def test_the_code_prompt_carries_lessons_files_the_last_turn_and_the_recalled_memory(
        self, tmp_path: Path
    ) -> None:
        from agents.build.prompts import CodeContext, code_prompt, numbered, testdesign_prompt
        from agents.memory.lessons import Lesson

        root = _repo(tmp_path)
        view = view_repo(root, "tests/test_calc.py", "import pkg.calc\n", [], 4000)
        context = CodeContext(
            tier="cheap", iteration=2, kind="openai", spec_relative="tests/test_calc.py",
            spec_text="import pkg.calc\n", last_output="1 failed", view=view,
            last_change="-    return a - b\n+    return a + b", refused="edit 1: not found",
            lessons=[Lesson("m7", "/bullpen/lessons-learned/py", "copy search text exactly")],
            memory=[Lesson("m3", "/bullpen/sandbox", "REPO is  the alias"),
                    Lesson("m4", "/bullpen/ops", "x" * 900)],
        )  # fmt: skip
        prompt = code_prompt({"problem": "adds wrong"}, context)
        lines = prompt.splitlines()
        assert lines[0] == "step: code" and lines[1].startswith("Lessons from shared memory")
        assert "- [m7] copy search text exactly" in prompt
        assert "--- pkg/calc.py\n" + numbered(BUGGY) + "\n--- end of pkg/calc.py" in prompt
        assert "1| def add(a, b):\n2|     return a - b\n3| \n" in prompt  # numbered lines
        assert "YOUR LAST ANSWER WAS NOT APPLIED:\nedit 1: not found" in prompt
        assert "YOUR LAST CHANGE" in prompt and "+    return a + b" in prompt
        assert "- [m3] (/bullpen/sandbox) REPO is the alias" in prompt
        assert "- [m4] (/bullpen/ops) " + "x" * 599 + "…\n" in prompt  # bounded
        # nothing the seat cannot do from inside the fence
        assert "@librarian" not in prompt and "bullpen memory recall" not in prompt
        assert '"start": <number>' in prompt  # the answer format, for a model
        bare = code_prompt({}, CodeContext("c", 1, "cmd", "t.py", "", "", view=view))
        assert bare.splitlines()[1].startswith("You are the code seat") and '"start"' not in bare
        assert "--- pkg/calc.py\n" + BUGGY.rstrip("\n") in bare  # a program reads the files
        assert "nothing saved there was recalled" in bare
        design = testdesign_prompt(
            {"language": "python", "spec_relative": "tests/test_calc.py", "targets": []}, view,
            [Lesson("m3", "/bullpen/sandbox", "REPO is the alias")],
        )  # fmt: skip
        assert design.startswith("step: testdesign\n") and "@librarian" not in design
        assert "- [m3] (/bullpen/sandbox) REPO is the alias" in design
        assert "REPOSITORY MAP" in design

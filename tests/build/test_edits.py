"""The code seat's answer format and the repository view: pure logic, real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.build.edits import CodeAnswer, EditRefused, FileChange, SearchReplace, apply_answer
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
    def test_a_unique_search_is_replaced(self, tmp_path: Path) -> None:
        """The one place the search text occurs is replaced; the rest of the file is kept."""
        root = _repo(tmp_path)
        edit = SearchReplace(path="pkg/calc.py", search="def add(a, b):\n    return a - b",
                             replace="def add(a, b):\n    return a + b")  # fmt: skip
        assert apply_answer(root, CodeAnswer(edits=[edit]), {"pkg/calc.py"}) == ["pkg/calc.py"]
        assert (root / "pkg/calc.py").read_text() == BUGGY.replace("a - b", "a + b", 1)

    @pytest.mark.parametrize(
        ("search", "why"),
        [("return a * b", "was not found"), ("return a - b", "was found 2 times")],
    )
    def test_an_edit_that_does_not_apply_writes_nothing_of_the_turn(
        self, tmp_path: Path, search: str, why: str
    ) -> None:
        """A missing or ambiguous search text refuses the whole answer, the good edit too."""
        root = _repo(tmp_path)
        good = SearchReplace(path="other.py", search="pass", replace="return 1")
        bad = SearchReplace(path="pkg/calc.py", search=search, replace="return 0")
        with pytest.raises(EditRefused) as caught:
            apply_answer(root, CodeAnswer(edits=[good, bad]), {"pkg/calc.py", "other.py"})
        assert why in caught.value.message and "edit 2 (pkg/calc.py)" in caught.value.message
        assert (root / "other.py").read_text().endswith("pass\n")
        assert (root / "pkg/calc.py").read_text() == BUGGY

    def test_only_shown_files_are_edited_or_replaced_and_new_files_are_welcome(
        self, tmp_path: Path
    ) -> None:
        """A file not shown cannot be edited nor overwritten blind; a new file can be made;
        the spec is protected."""
        root = _repo(tmp_path)
        blind = CodeAnswer(files=[FileChange(path="pkg/calc.py", content="guess\n")])
        with pytest.raises(EditRefused, match="was not shown to you in full"):
            apply_answer(root, blind, set())
        edit = CodeAnswer(edits=[SearchReplace(path="pkg/calc.py", search="a", replace="b")])
        with pytest.raises(EditRefused, match="not shown to you in full"):
            apply_answer(root, edit, set())
        spec = CodeAnswer(files=[FileChange(path="tests/test_x.py", content="")])
        with pytest.raises(EditRefused, match="the spec is the contract"):
            apply_answer(root, spec, set(), {"tests/test_x.py"})
        new = CodeAnswer(files=[FileChange(path="pkg/new.py", content="X = 1\n")])
        assert apply_answer(root, new, set()) == ["pkg/new.py"]
        assert (root / "pkg/calc.py").read_text() == BUGGY

    def test_an_answer_that_changes_nothing_is_invalid(self) -> None:
        with pytest.raises(ValueError, match="changes nothing"):
            CodeAnswer.model_validate({"edits": [], "files": []})

    def test_a_path_out_of_the_clone_is_a_rule_broken(self, tmp_path: Path) -> None:
        root = _repo(tmp_path)
        out = CodeAnswer(edits=[SearchReplace(path="../x.py", search="a", replace="b")])
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
        from agents.build.prompts import CodeContext, code_prompt, testdesign_prompt
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
        assert "--- pkg/calc.py\n" + BUGGY.rstrip("\n") + "\n--- end of pkg/calc.py" in prompt
        assert "YOUR LAST ANSWER WAS NOT APPLIED:\nedit 1: not found" in prompt
        assert "YOUR LAST CHANGE" in prompt and "+    return a + b" in prompt
        assert "- [m3] (/bullpen/sandbox) REPO is the alias" in prompt
        assert "- [m4] (/bullpen/ops) " + "x" * 599 + "…\n" in prompt  # bounded
        # nothing the seat cannot do from inside the fence
        assert "@librarian" not in prompt and "bullpen memory recall" not in prompt
        assert '"search"' in prompt  # the answer format, for a model
        bare = code_prompt({}, CodeContext("c", 1, "cmd", "t.py", "", ""))
        assert bare.splitlines()[1].startswith("You are the code seat") and '"search"' not in bare
        assert "nothing saved there was recalled" in bare
        design = testdesign_prompt(
            {"language": "python", "spec_relative": "tests/test_calc.py", "targets": []}, view,
            [Lesson("m3", "/bullpen/sandbox", "REPO is the alias")],
        )  # fmt: skip
        assert design.startswith("step: testdesign\n") and "@librarian" not in design
        assert "- [m3] (/bullpen/sandbox) REPO is the alias" in design
        assert "REPOSITORY MAP" in design

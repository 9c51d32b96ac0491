"""The build-dir rules: root, alias, scaffold, baseline, and what is refused."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agents.build.builddir import clone, infer_targets, point_alias, prepare, resolve_repo
from agents.build.config import BuildConfig
from agents.build.routing import by_name
from room.errors import StepFailed
from tests.build.helpers import GO_SPEC, JS_SPEC, PY_SPEC


def _config(tmp_path: Path) -> BuildConfig:
    (tmp_path / "builds").mkdir(exist_ok=True)
    return BuildConfig(root=str(tmp_path / "builds"), alias=str(tmp_path / "sandbox"))


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_plain_dir_is_scaffolded_with_the_stubs_its_spec_imports(tmp_path: Path) -> None:
    config = _config(tmp_path)
    folder = Path(config.root) / "calc"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests/test_calc.py").write_text(PY_SPEC)
    real = resolve_repo(config, str(folder))
    point_alias(config, real)
    assert os.readlink(config.alias) == str(real)
    done = prepare(config, real, by_name("python"), "tests/test_calc.py", [])
    assert done.scaffolded and done.stubs == ["calc.py"] and (folder / "calc.py").read_text() == ""
    assert _git(folder, "rev-parse", "HEAD") == done.baseline
    assert _git(folder, "status", "--porcelain") == ""
    again = resolve_repo(config, config.alias)  # the alias resolves to the same dir
    assert again == real
    artifact = clone(config, real)
    assert artifact.parent == Path(config.root).resolve() and artifact.name.startswith("grind-")
    # its git directory lies beside it, never in it: the fenced side sees only a work tree
    assert not (artifact / ".git").exists()
    gitdir = artifact.with_name(artifact.name + ".git")
    assert _git(folder, "--git-dir", str(gitdir), "rev-parse", "HEAD") == done.baseline


def test_targets_are_inferred_per_language(tmp_path: Path) -> None:
    assert infer_targets(by_name("js"), "web/calc.test.js", JS_SPEC, tmp_path) == ["web/calc.js"]
    assert infer_targets(by_name("go"), "calc_test.go", GO_SPEC, tmp_path) == ["calc.go"]
    spec = "import os\nimport pytest\nfrom shapes import area\nimport a.b\n"
    assert infer_targets(by_name("python"), "tests/test_x.py", spec, tmp_path) == ["shapes.py"]


def test_a_dir_of_more_than_50_files_is_refused_unless_a_git_repository(tmp_path: Path) -> None:
    config = _config(tmp_path)
    folder = Path(config.root) / "big"
    folder.mkdir()
    for n in range(51):
        (folder / f"f{n}.txt").write_text("x")
    with pytest.raises(StepFailed, match="more than 50 files and is not a git repository"):
        prepare(config, folder, by_name("python"), "tests/test_x.py", [])
    assert not (folder / ".git").exists()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run(["git", "-C", str(folder), "add", "-A"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(folder),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "base",
        ],
        check=True,
    )
    assert not prepare(config, folder, by_name("python"), "tests/test_x.py", []).scaffolded


def test_a_git_dir_with_uncommitted_changes_or_no_commit_is_refused(tmp_path: Path) -> None:
    config = _config(tmp_path)
    folder = Path(config.root) / "repo"
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    with pytest.raises(StepFailed, match="git repository without a commit"):
        prepare(config, folder, by_name("python"), "test_x.py", [])
    (folder / "a.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(folder), "add", "-A"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(folder),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "base",
        ],
        check=True,
    )
    (folder / "a.py").write_text("x = 2\n")
    with pytest.raises(StepFailed, match="uncommitted changes"):
        prepare(config, folder, by_name("python"), "test_x.py", [])


def test_a_repo_outside_the_root_or_under_home_is_refused(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with pytest.raises(StepFailed, match="lies under /home"):
        resolve_repo(config, "/home/someone/code")
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(StepFailed, match="outside"):
        resolve_repo(config, str(tmp_path / "elsewhere"))
    link = Path(config.root) / "sneaky"
    link.symlink_to("/etc")  # a link under the root that leads to a system path
    with pytest.raises(StepFailed, match="lies under /etc"):
        resolve_repo(config, str(link))
    with pytest.raises(StepFailed, match="DIR NOT FOUND"):
        resolve_repo(config, str(Path(config.root) / "missing"))


def test_the_alias_is_never_a_real_folder(tmp_path: Path) -> None:
    config = _config(tmp_path)
    Path(config.alias).mkdir()
    (Path(config.root) / "c").mkdir()
    with pytest.raises(StepFailed, match="is a real file or folder, not a link"):
        point_alias(config, Path(config.root) / "c")


@pytest.mark.parametrize("path", ["../escaped.py", "/etc/escaped.py", ".git/config", "out/x.py"])
def test_a_model_answer_is_written_only_inside_the_clone(tmp_path: Path, path: str) -> None:
    """An openai code seat's files: a path out of the clone (absolute, '..', .git, or through
    a link that leads out) refuses the whole answer, writing nothing."""
    from agents.build.edits import CodeAnswer, FileChange, apply_answer
    from agents.roots import OutsideRoot

    clone_dir = tmp_path / "clone"
    clone_dir.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (clone_dir / "out").symlink_to(tmp_path / "elsewhere")
    files = [FileChange(path="calc.py", content="x = 1\n"), FileChange(path=path, content="bad\n")]
    with pytest.raises(OutsideRoot):
        apply_answer(clone_dir, CodeAnswer(files=files), set())
    assert not (clone_dir / "calc.py").exists()
    assert list((tmp_path / "elsewhere").iterdir()) == [] and not (tmp_path / "escaped.py").exists()
    assert apply_answer(clone_dir, CodeAnswer(files=files[:1]), set()) == ["calc.py"]


def test_an_alias_that_points_nowhere_says_how_to_point_it(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with pytest.raises(StepFailed, match="points nowhere yet") as caught:
        resolve_repo(config, f"{config.alias}/x")
    assert f"ln -sfn {config.root}/<slug> {config.alias}" in caught.value.message

"""bullpen's one git (agents/git/safe.py) on real repositories whose own files name commands.

Each planted key would run a program that leaves a marker outside the repository
and copies a secret there. Through agents/git/safe.py the git call is refused by the key's
name and the marker never appears; for the keys a local git call would run, the
same repository under a plain `git` shows the plant is live (the marker appears).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.git.guard import attributes_refusal, config_refusal, key_allowed
from agents.git.safe import GitError, PlantedConfig, check_repo, git

SECRET = "s3cret-planted-test-value"


@dataclass
class Scene:
    repo: Path
    marker: Path
    script: Path

    def config(self, text: str) -> None:
        with (self.repo / ".git" / "config").open("a") as config:
            config.write(text)

    def write(self, relative: str, text: str) -> None:
        path = self.repo / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _plain(repo: Path, *args: str) -> None:
    """git as anyone would run it in the repository: nothing of agents/git/safe.py."""
    subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=30)


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    repo = tmp_path / "repo"
    repo.mkdir()
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    marker = tmp_path / "outside" / "marker"
    marker.parent.mkdir()
    script = tmp_path / "planted.sh"
    script.write_text(f"#!/bin/sh\ncat {secret} >> {marker}\ncat\n")
    script.chmod(0o755)
    _plain(repo, "init", "-q")
    (repo / "a.txt").write_text("one\n")
    _plain(repo, "add", "-A")
    _plain(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    return Scene(repo, marker, script)


# (name, the key the refusal names, how it is planted, the git call it would ride, live)
Plant = Callable[[Scene], None]
CASES: list[tuple[str, str, Plant, tuple[str, ...], bool]] = [
    (
        "filter clean",
        "filter.x.clean",
        lambda s: (
            s.config(f'[filter "x"]\n\tclean = {s.script}\n'),
            s.write(".gitattributes", "* filter=x\n"),
        ),
        ("add", "-A"),
        True,
    ),
    (
        "filter process",
        "filter.x.process",
        lambda s: (
            s.config(f'[filter "x"]\n\tprocess = {s.script}\n'),
            s.write(".git/info/attributes", "* filter=x\n"),
        ),
        ("add", "-A"),
        False,
    ),
    (
        "diff.external",
        "diff.external",
        lambda s: s.config(f"[diff]\n\texternal = {s.script}\n"),
        ("diff",),
        True,
    ),
    (
        "textconv",
        "diff.x.textconv",
        lambda s: (
            s.config(f'[diff "x"]\n\ttextconv = {s.script}\n'),
            s.write(".gitattributes", "*.txt diff=x\n"),
        ),
        ("diff",),
        True,
    ),
    (
        "merge driver",
        "merge.x.driver",
        lambda s: s.config(f'[merge "x"]\n\tdriver = {s.script} %O %A %B\n'),
        ("status",),
        False,
    ),
    (
        "fsmonitor",
        "core.fsmonitor",
        lambda s: s.config(f"[core]\n\tfsmonitor = {s.script}\n"),
        ("status",),
        True,
    ),
    (
        "hooksPath",
        "core.hookspath",
        lambda s: s.config(f"[core]\n\thooksPath = {s.script.parent}\n"),
        ("commit", "-qm", "x", "--allow-empty"),
        False,
    ),
    (
        "sshCommand",
        "core.sshcommand",
        lambda s: s.config(f"[core]\n\tsshCommand = {s.script}\n"),
        ("status",),
        False,
    ),
    (
        "gitProxy",
        "core.gitproxy",
        lambda s: s.config(f"[core]\n\tgitProxy = {s.script}\n"),
        ("status",),
        False,
    ),
    (
        "gpg.program",
        "gpg.program",
        lambda s: s.config(f"[gpg]\n\tprogram = {s.script}\n[commit]\n\tgpgsign = true\n"),
        ("commit", "-qm", "x", "--allow-empty"),
        True,
    ),
    (
        "pager",
        "core.pager",
        lambda s: s.config(f"[core]\n\tpager = {s.script}\n"),
        ("log",),
        False,
    ),
    (
        "include.path",
        "include.path",
        lambda s: (
            s.write("inc.cfg", f'[filter "y"]\n\tclean = {s.script}\n'),
            s.config(f"[include]\n\tpath = {s.repo / 'inc.cfg'}\n"),
            s.write(".gitattributes", "* filter=y\n"),
        ),
        ("add", "-A"),
        True,
    ),
    (
        "includeIf",
        "includeif.gitdir:/.path",
        lambda s: (
            s.write("inc.cfg", f'[filter "y"]\n\tclean = {s.script}\n'),
            s.config(f'[includeIf "gitdir:/"]\n\tpath = {s.repo / "inc.cfg"}\n'),
            s.write(".gitattributes", "* filter=y\n"),
        ),
        ("add", "-A"),
        True,
    ),
    (
        "uploadpack",
        "remote.origin.uploadpack",
        lambda s: s.config(f'[remote "origin"]\n\turl = /x\n\tuploadpack = {s.script}\n'),
        ("status",),
        False,
    ),
    (
        "worktree elsewhere",
        "core.worktree",
        lambda s: s.config("[core]\n\tworktree = /\n"),
        ("status",),
        False,
    ),
]


@pytest.mark.parametrize(
    ("key", "plant", "call", "live"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_planted_key_is_refused_by_name_and_never_runs(
    scene: Scene, key: str, plant: Plant, call: tuple[str, ...], live: bool
) -> None:
    """Every dangerous key class: git is not run, the refusal names the key and the file."""
    plant(scene)
    (scene.repo / "a.txt").write_text("two\n")
    with pytest.raises(PlantedConfig) as caught:
        git(scene.repo, *call, identity=True)
    message = str(caught.value)
    assert f"git config sets {key}".lower() in message.lower()
    assert "(in .git/config)" in message and "nothing was run" in message
    assert caught.value.planted.key.lower() == key.lower()
    assert not scene.marker.exists()
    if live:  # the same repository under a plain git runs the plant: the test can fail
        _plain(scene.repo, "-c", "user.name=t", "-c", "user.email=t@t", *call)
        assert SECRET in scene.marker.read_text()


@pytest.mark.parametrize(
    ("place", "text", "named"),
    [
        (".gitattributes", "* filter=x\n", "filter=x"),
        ("deep/down/.gitattributes", "*.c diff=evil\n", "diff=evil"),
        (".git/info/attributes", "* merge=evil\n", "merge=evil"),
        (".gitattributes", "[attr]innocent filter=x\n*.txt innocent\n", "filter=x"),
    ],
)
def test_attributes_naming_a_driver_are_refused(
    scene: Scene, place: str, text: str, named: str
) -> None:
    """An attributes file naming a driver is refused even with no driver configured."""
    scene.write(place, text)
    with pytest.raises(PlantedConfig) as caught:
        git(scene.repo, "status")
    assert caught.value.planted.key == named and caught.value.planted.place == place
    assert f"git attributes name the {named.split('=')[0]} driver" in str(caught.value)


def test_harmless_config_and_attributes_pass(scene: Scene) -> None:
    """What a clone, a remote and an operator's tidy repository hold is not refused."""
    scene.config(
        '[remote "origin"]\n\turl = /elsewhere\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
        '[branch "main"]\n\tremote = origin\n\tmerge = refs/heads/main\n'
        "[user]\n\tname = Op\n\temail = op@example.org\n[core]\n\tautocrlf = input\n"
    )
    scene.write(
        ".gitattributes", "*.png binary\n*.py diff=python\n*.txt merge=union -diff\n* text=auto\n"
    )
    assert git(scene.repo, "status", "--porcelain")[0] == 0


def test_a_nested_repository_is_checked_and_named_from_the_top(scene: Scene) -> None:
    """git may run in a repository nested in the tree (a gitlink): its config counts too."""
    nested = scene.repo / "vendor" / "lib"
    nested.mkdir(parents=True)
    _plain(nested, "init", "-q")
    with (nested / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {scene.script}\n")
    with pytest.raises(PlantedConfig) as caught:
        git(scene.repo, "add", "-A")
    assert caught.value.planted.place == "vendor/lib/.git/config"
    assert not scene.marker.exists()


def test_a_gitfile_and_commondir_are_followed(scene: Scene, tmp_path: Path) -> None:
    """A `.git` file pointing elsewhere, and a commondir, lead to the config git would read."""
    elsewhere = tmp_path / "elsewhere.git"
    os.replace(scene.repo / ".git", elsewhere)
    (scene.repo / ".git").write_text(f"gitdir: {elsewhere}\n")
    assert git(scene.repo, "status", "--porcelain")[0] == 0  # a plain gitfile is fine
    common = tmp_path / "common"
    common.mkdir()
    (common / "config").write_text(f'[filter "x"]\n\tclean = {scene.script}\n')
    (elsewhere / "commondir").write_text(str(common))
    with pytest.raises(PlantedConfig, match=r"git config sets filter\.x\.clean"):
        git(scene.repo, "status")


def test_a_config_that_is_not_a_file_is_refused_at_once(scene: Scene) -> None:
    """A named pipe as .git/config would hang a reader: it is refused, nothing blocks."""
    config = scene.repo / ".git" / "config"
    config.unlink()
    os.mkfifo(config)
    with pytest.raises(PlantedConfig, match="not a regular file"):
        check_repo(scene.repo)


def test_the_environment_and_global_config_name_nothing(
    scene: Scene, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIT_* variables, a global config and a global attributes file are not read."""
    global_config = tmp_path / "gitconfig"
    global_config.write_text(f'[filter "g"]\n\tclean = {scene.script}\n')
    xdg = tmp_path / "xdg"
    (xdg / "git").mkdir(parents=True)
    (xdg / "git" / "attributes").write_text("* filter=g\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(global_config))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", str(scene.script))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='{scene.script}'")
    (scene.repo / "a.txt").write_text("changed\n")
    git(scene.repo, "diff")
    git(scene.repo, "add", "-A")
    git(scene.repo, "status")
    assert not scene.marker.exists()
    _plain(scene.repo, "diff")  # the same environment under a plain git runs it
    assert SECRET in scene.marker.read_text()


class TestChecker:
    @pytest.mark.parametrize(
        "key",
        [
            "filter.x.clean",
            "filter.X.smudge",
            "filter.x.process",
            "diff.external",
            "diff.x.textconv",
            "diff.x.command",
            "merge.x.driver",
            "core.fsmonitor",
            "core.hookspath",
            "core.sshcommand",
            "core.gitproxy",
            "core.pager",
            "core.editor",
            "core.askpass",
            "core.attributesfile",
            "core.worktree",
            "gpg.program",
            "gpg.ssh.program",
            "commit.gpgsign",
            "include.path",
            "includeif.gitdir:/x/.path",
            "credential.helper",
            "remote.origin.uploadpack",
            "remote.origin.receivepack",
            "remote.origin.proxy",
            "pager.log",
            "sequence.editor",
            "alias.st",
            "uploadpack.packobjectshook",
            "a.key.we.never.heard.of",
            "nodot",
        ],
    )
    def test_anything_off_the_allow_list_is_refused(self, key: str) -> None:
        assert not key_allowed(key)
        planted = config_refusal(["core.bare", key], ".git/config")
        assert planted is not None and planted.key == key

    @pytest.mark.parametrize(
        "key",
        [
            "core.repositoryformatversion",
            "core.filemode",
            "core.bare",
            "core.logallrefupdates",
            "remote.origin.url",
            "remote.my.dotted.name.fetch",
            "branch.feature/x.merge",
            "user.name",
            "extensions.objectformat",
        ],
    )
    def test_the_allow_list(self, key: str) -> None:
        assert key_allowed(key) and config_refusal([key], ".git/config") is None

    def test_attributes_lines(self) -> None:
        assert attributes_refusal("# * filter=x\n*.png binary -diff\n", "a") is None
        refused = attributes_refusal('"a b" diff=cpp\n"x filter=y" text\n', ".gitattributes")
        assert refused is not None and refused.key == "filter=y"


def test_a_failing_git_is_still_a_git_error(scene: Scene) -> None:
    with pytest.raises(GitError, match="failed"):
        git(scene.repo, "rev-parse", "--verify", "no-such-ref")

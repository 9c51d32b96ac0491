"""A work tree whose git directory lives apart from it: the grinder's clone, read as data.

A grind's clone is written by a code seat and by the model-written code under
test, every byte of it. When its git directory sat inside it (`.git`), whatever
they wrote there was interpreted by bullpen's own git, outside every fence: an
index entry `../../outside/canary.txt` was hashed and committed, a `sub/.git`
gitdir file became a gitlink to a private repository, `objects/info/alternates`
and a rewritten branch or replace ref fed another repository's files into the
next prompt and the room. So the grinder's git directory lives beside the clone
(`<clone>.git`, `Apart.beside`), where no fence lets the fenced side write (the
fences hide it), and the clone holds no `.git` at all:

- before every git call (`apart_git`), the git directory is checked to be
  bullpen's own: a plain folder with no link in it, no `commondir`,
  `alternates`, `grafts`, `shallow` or replace ref, its config on the
  allow-list (agents/git/guard.py); a failure is `Tampered`, and nothing runs;
- the work tree is data: a `.git` anywhere in it (a folder, a file, a link, at
  the top or nested) is refused (`PlantedConfig`, kind "worktree", naming the
  files), and its `.gitattributes` are checked for drivers as before;
- each commit rebuilds the index from bullpen's own last commit and the work tree
  (`commit_tree`), and refuses a staged gitlink or a path that leaves the tree;
- `defuse` moves every planted `.git` aside, so no git, ours or a reviewer's,
  reads it by accident.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agents.git.guard import Planted
from agents.git.safe import (
    GIT_TIMEOUT_S,
    GitError,
    PlantedConfig,
    check_attributes,
    check_config,
    check_gitdir,
    check_repo,
    git,
    git_at,
)

__all__ = ["Apart", "Tampered", "apart_git", "check_apart", "clone_apart", "commit_tree", "defuse"]

# What in a git directory makes git read another repository's objects or history.
REDIRECTS = (
    "commondir",
    "objects/info/alternates",
    "objects/info/http-alternates",
    "info/grafts",
    "shallow",
)
SHOWN = 6  # planted files named in a refusal; the rest are counted
GITLINK = "160000"


@dataclass(frozen=True)
class Apart:
    """A work tree and the git directory kept for it outside everything a fence exposes."""

    gitdir: Path
    tree: Path

    @classmethod
    def beside(cls, tree: Path) -> Apart:
        """`<tree>.git` beside the tree: under the build root, which no fence lets a run write."""
        return cls(tree.with_name(tree.name + ".git"), tree)


class Tampered(GitError):
    """bullpen's own git directory was changed by someone else: nothing was run."""

    code = "git_tampered"

    def __init__(self, repo: Apart, what: str) -> None:
        self.repo, self.what = repo, what
        super().__init__(
            f"bullpen's own git directory {repo.gitdir} was changed from outside ({what}), "
            "so nothing was run; the fence did not keep it out: run builds under bwrap "
            "([build] fence), and read that folder by hand"
        )


def _where(repo: Apart) -> list[str]:
    return ["--git-dir", str(repo.gitdir), "--work-tree", str(repo.tree), "-C", str(repo.tree)]


def apart_git(
    repo: Apart,
    *args: str,
    check: bool = True,
    identity: bool = False,
    timeout: float = GIT_TIMEOUT_S,
) -> tuple[int, bytes, str]:
    """git on `repo`, both halves checked first (check_apart); (exit, stdout, stderr)."""
    check_apart(repo)
    return _git(repo, *args, check=check, identity=identity, timeout=timeout)


def _git(repo: Apart, *args: str, **options: Any) -> tuple[int, bytes, str]:
    """git on `repo` with no check: only right after check_apart, nothing run in between."""
    return git_at(_where(repo), str(repo.tree), *args, **options)


def clone_apart(source: Path, tree: Path) -> Apart:
    """A clone of `source` at `tree` whose git directory is `Apart.beside(tree)`; the work tree
    keeps no `.git` (not even the gitdir file `git clone --separate-git-dir` writes)."""
    repo = Apart.beside(tree)
    check_repo(source)
    git(tree.parent, "clone", "-q", "--no-hardlinks", "--separate-git-dir", str(repo.gitdir),
        str(source), str(tree))  # fmt: skip
    os.remove(tree / ".git")
    return repo


def _first_link(folder: str) -> str | None:
    """The first link under `folder` (the type from the directory entry: no stat per file)."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_symlink():
                return entry.path
            if entry.is_dir(follow_symlinks=False):
                found = _first_link(entry.path)
                if found is not None:
                    return found
    return None


def _own_gitdir(repo: Apart) -> None:
    """Tampered unless the git directory is still the plain folder `git clone` made."""
    gitdir = repo.gitdir
    if gitdir.is_symlink() or not gitdir.is_dir():
        raise Tampered(repo, "it is not a folder (a link, a file, or gone)")
    for name in REDIRECTS:
        if os.path.lexists(gitdir / name):
            raise Tampered(repo, f"{name} would make git read another repository")
    link = _first_link(str(gitdir))
    if link is not None:
        raise Tampered(repo, f"{os.path.relpath(link, gitdir)} is a link")
    replace = gitdir / "refs" / "replace"
    if replace.is_dir() and any(replace.iterdir()):
        raise Tampered(repo, "refs/replace swaps objects for others")
    packed = gitdir / "packed-refs"
    if packed.is_file() and b" refs/replace/" in packed.read_bytes():
        raise Tampered(repo, "packed-refs holds a replace ref")
    try:
        check_gitdir(gitdir, gitdir, gitdir)
    except PlantedConfig as exc:
        raise Tampered(repo, f"its {exc.planted.what}, in {exc.planted.place}") from None


def _planted_files(tree: Path, dot: Path) -> list[str]:
    """What a planted `.git` holds, relative to the tree (a link or a file: itself)."""
    if dot.is_symlink() or not dot.is_dir():
        kind = "a link" if dot.is_symlink() else "a gitdir file" if dot.is_file() else "a node"
        return [f"{dot.relative_to(tree)} ({kind})"]
    found = []
    for where, _, files in os.walk(dot):
        found += [str(Path(where, name).relative_to(tree)) for name in files]
    return sorted(found) or [f"{dot.relative_to(tree)} (an empty folder)"]


def _refuse_dot(tree: Path, dot: Path) -> PlantedConfig:
    """The refusal of a `.git` in the work tree; one whose config names a command says so."""
    if dot.is_dir() and not dot.is_symlink():
        for name in ("config", "config.worktree"):
            path = dot / name
            if stat.S_ISREG(os.lstat(path).st_mode if os.path.lexists(path) else 0):
                check_config(tree, path)  # raises, naming the key
    files = _planted_files(tree, dot)
    listed = ", ".join(files[:SHOWN]) + (f" and {len(files) - SHOWN} more" if len(files) > SHOWN
                                         else "")  # fmt: skip
    return PlantedConfig(tree, Planted(listed, str(dot.relative_to(tree)), "worktree"))


def check_apart(repo: Apart) -> None:
    """Tampered when the git directory is not bullpen's own any more; PlantedConfig when the
    work tree holds a `.git` (anywhere) or an attributes file naming a driver."""
    _own_gitdir(repo)
    tree = repo.tree
    for where, dirs, files in os.walk(tree):
        here = Path(where)
        if ".git" in dirs or ".git" in files:
            raise _refuse_dot(tree, here / ".git")
        if ".gitattributes" in files:
            check_attributes(tree, here / ".gitattributes", follow=False)


def defuse(tree: Path) -> list[str]:
    """Move every `.git` in the work tree aside (`.git-refused-<ts>` beside it), so no git,
    ours or a person's reviewing the clone, reads what was planted; the new names."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    moved = []
    for where, dirs, files in os.walk(tree):
        if ".git" in dirs or ".git" in files:
            target = Path(where, f".git-refused-{stamp}")
            with contextlib.suppress(OSError):
                os.replace(Path(where, ".git"), target)
                moved.append(str(target.relative_to(tree)))
        dirs[:] = [d for d in dirs if d != ".git" and not d.startswith(".git-refused-")]
    return moved


def _leaves(tree: Path, path: str) -> str | None:
    """Why a staged path is not a plain place in the work tree, or None."""
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts):
        return "leaves the work tree"
    here = tree
    for part in parts[:-1]:
        here = here / part
        if here.is_symlink() or not here.is_dir():
            return "goes through a link"
    return None


def _staged(raw: bytes) -> list[tuple[str, str, str]]:
    """(new mode, status, path) of each entry of `git diff-index --raw -z`."""
    fields = raw.decode("utf-8", "surrogateescape").split("\0")
    entries = []
    for head, path in zip(fields[0::2], fields[1::2], strict=False):
        if head.startswith(":"):
            _, new_mode, _, _, status = head[1:].split(" ")
            entries.append((new_mode, status, path))
    return entries


def commit_tree(repo: Apart, head: str, message: str) -> tuple[str, list[str]]:
    """Commit the work tree as it is now on top of `head` (bullpen's own last commit): the
    index rebuilt from `head` and the tree, never one anyone else wrote. (The new head, the
    paths changed); PlantedConfig for a staged gitlink or a path that leaves the tree."""
    check_apart(repo)  # once: the calls below follow one another with nothing run between
    (repo.gitdir / "index").unlink(missing_ok=True)
    _git(repo, "read-tree", head)
    _git(repo, "add", "-A")
    raw = _git(repo, "diff-index", "--cached", "--raw", "-z", "--no-renames", head)[1]
    entries = _staged(raw)
    for mode, status, path in entries:
        if mode == GITLINK:
            why = "is a gitlink (a nested repository), which bullpen's git never commits"
        elif status != "D":
            why = _leaves(repo.tree, path) or ""
        else:
            continue
        if why:
            raise PlantedConfig(repo.tree, Planted(f"{path} {why}", path, "staged"))
    if not entries:
        return head, []
    tree = _git(repo, "write-tree")[1].decode().strip()
    new = _git(repo, "commit-tree", tree, "-p", head, "-m", message, identity=True)[1]
    commit = new.decode().strip()
    _git(repo, "update-ref", "HEAD", commit, head)
    return commit, [path for _, _, path in entries]

"""Plain `git` for the backpass: read at a commit, branch in a worktree, commit, clean up.

Every call is bullpen's one safe git (agents/git/safe.py): an explicit argv
(never a shell), a clean environment, no system or global config, no hooks,
and a memory repository whose own config or attributes name a command (a
filter driver, `gpg.program`, `core.fsmonitor`, …) refused by name before
git runs (PlantedConfig): an unattended backpass must not run programs a
memory repository names. A git that overruns is stopped by killing the
process group of the one child it started — never by a name or pattern: the
hand run's `pkill -f` matched its own caller and killed the run.

Safety rules, enforced here rather than hoped for:
- the main worktree's checked-out branch and files are never touched: work
  happens in a new worktree (`git worktree add -b <branch> <path> <base>`);
- no commit lands on a protected branch (the default branch, whatever the
  main worktree has checked out, `init.defaultBranch`, main, master), and a
  commit is only made on a branch under the backpass prefix;
- nothing is ever pushed (there is no push in this module);
- a commit whose message or files hold a secret of the home or a private key
  (trust/screen.py) is refused before `git add`: SecretFound names the file;
- a step that fails removes the worktrees and branches it created.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from agents.git.safe import GitError, PlantedConfig, git, git_argv, git_env
from trust.screen import HomeSecrets, Screen

__all__ = [
    "GitError",
    "PlantedConfig",
    "RepoInfo",
    "Worktree",
    "add_worktree",
    "commit",
    "discard",
    "free_branch",
    "git",
    "git_argv",
    "git_env",
    "inspect_repo",
    "release",
    "repos_from",
    "show_file",
]


def _text(repo: Path, *args: str) -> str:
    return git(repo, *args)[1].decode("utf-8", "replace").strip()


def _maybe(repo: Path, *args: str) -> str | None:
    code, out, _ = git(repo, *args, check=False)
    return out.decode("utf-8", "replace").strip() if code == 0 else None


def _branch_exists(repo: Path, name: str) -> bool:
    return git(repo, "show-ref", "--verify", "--quiet", f"refs/heads/{name}", check=False)[0] == 0


@dataclass(frozen=True)
class RepoInfo:
    """What a run needs to know about one memory repository, fixed at listing time."""

    path: str
    default: str  # the default branch
    protected: tuple[str, ...]  # branches never committed on
    base: str  # the branch the run builds on: the newest unmerged backpass branch, else default
    commit: str  # the base's commit: every step reads and branches from exactly this
    main_worktree: str
    unmerged: tuple[str, ...]  # backpass branches not merged into the default branch yet

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "default": self.default,
            "protected": list(self.protected),
            "base": self.base,
            "commit": self.commit,
            "main_worktree": self.main_worktree,
            "unmerged": list(self.unmerged),
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> RepoInfo:
        return cls(
            path=str(data["path"]),
            default=str(data["default"]),
            protected=tuple(data.get("protected", ()) or ()),  # type: ignore[arg-type]
            base=str(data["base"]),
            commit=str(data["commit"]),
            main_worktree=str(data["main_worktree"]),
            unmerged=tuple(data.get("unmerged", ()) or ()),  # type: ignore[arg-type]
        )


def repos_from(data: dict[str, object]) -> dict[str, RepoInfo]:
    """The public and private RepoInfo an ask carries in `data["repos"]`."""
    try:
        repos: dict[str, dict[str, object]] = data["repos"]  # type: ignore[assignment]
        return {name: RepoInfo.from_dict(repos[name]) for name in ("public", "private")}
    except (KeyError, TypeError) as exc:
        raise GitError(f"this ask lacks the repositories' bases (data.repos): {exc}") from None


def _main_worktree(repo: Path) -> tuple[str, str | None]:
    """The main worktree's path and checked-out branch (None when detached)."""
    listing = _text(repo, "worktree", "list", "--porcelain")
    path, branch = "", None
    for line in listing.split("\n"):
        if not line.strip():
            break  # the first record is the main worktree
        if line.startswith("worktree "):
            path = line.removeprefix("worktree ")
        elif line.startswith("branch refs/heads/"):
            branch = line.removeprefix("branch refs/heads/")
    return path, branch


def inspect_repo(repo: Path, prefix: str) -> RepoInfo:
    """Find the default branch and the base to build on; GitError says what is wrong."""
    if not repo.is_dir():
        raise GitError(
            f"the memory repository {repo} does not exist; create it (git init, add memory.md, "
            "commit) or point [backpass] public/private at it"
        )
    if _maybe(repo, "rev-parse", "--is-inside-work-tree") != "true":
        raise GitError(f"{repo} is not a git work tree; run `git init` there and commit memory.md")
    top = _maybe(repo, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != repo.resolve():
        raise GitError(
            f"{repo} is inside the repository {top} but is not its top folder; point "
            "[backpass] public/private at the repository's top folder"
        )
    main_path, checked_out = _main_worktree(repo)
    candidates: list[str] = []
    remote_head = _maybe(repo, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD")
    if remote_head and "/" in remote_head:
        candidates.append(remote_head.split("/", 1)[1])
    if checked_out:
        candidates.append(checked_out)
    configured = _maybe(repo, "config", "--get", "init.defaultBranch")
    if configured:
        candidates.append(configured)
    candidates += ["main", "master"]
    existing = [name for name in dict.fromkeys(candidates) if _branch_exists(repo, name)]
    if not existing:
        raise GitError(
            f"cannot tell the default branch of {repo}: it has no commit on "
            f"{', '.join(dict.fromkeys(candidates))}; commit memory.md on the default branch"
        )
    default = existing[0]
    if default.startswith(prefix + "/"):
        raise GitError(
            f"{repo} has {default} checked out as if it were the default branch; check out "
            "the default branch in the main worktree and run again"
        )
    unmerged = _text(
        repo,
        "for-each-ref",
        "--sort=-committerdate",
        "--format=%(refname:short)",
        "--no-merged",
        default,
        f"refs/heads/{prefix}/",
    ).split()
    base = unmerged[0] if unmerged else default
    commit_sha = _text(repo, "rev-parse", "--verify", f"refs/heads/{base}^{{commit}}")
    return RepoInfo(
        path=str(repo),
        default=default,
        protected=tuple(existing),
        base=base,
        commit=commit_sha,
        main_worktree=main_path,
        unmerged=tuple(unmerged),
    )


def show_file(repo: Path, commit_sha: str, path: str) -> str | None:
    """A file's text at a commit, exactly (no newline translation); None when it is not there."""
    spec = f"{commit_sha}:{path}"
    if git(repo, "cat-file", "-e", spec, check=False)[0] != 0:
        return None
    data = git(repo, "cat-file", "blob", spec)[1]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GitError(f"{path} at {commit_sha[:12]} in {repo} is not UTF-8 text: {exc}") from None


def free_branch(repo: Path, wanted: str) -> str:
    """`wanted`, or `wanted-2`, `wanted-3` … when a branch of that name already exists."""
    if git(repo, "check-ref-format", "--branch", wanted, check=False)[0] != 0:
        raise GitError(f"{wanted!r} is not a valid branch name; change [backpass] branch_prefix")
    for number in range(1, 1000):
        name = wanted if number == 1 else f"{wanted}-{number}"
        if not _branch_exists(repo, name):
            return name
    raise GitError(f"{repo} has 999 branches named {wanted}-N; delete old backpass branches")


@dataclass
class Worktree:
    """A worktree this run created, on a branch this run created."""

    repo: Path
    path: Path
    branch: str
    info: RepoInfo
    commits: int = 0


def add_worktree(info: RepoInfo, branch: str, path: Path) -> Worktree:
    """A new branch at the run's base commit, checked out in a new worktree at `path`."""
    repo = Path(info.path)
    if branch in info.protected:
        raise GitError(f"refusing to create a worktree on protected branch {branch} in {repo}")
    if path.exists():
        raise GitError(f"{path} already exists; a worktree is only ever made in a new folder")
    path.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "--quiet", "-b", branch, str(path), info.commit)
    return Worktree(repo, path, branch, info)


def _needs_identity(repo: Path) -> bool:
    name = git(repo, "config", "--get", "user.name", check=False)[0]
    email = git(repo, "config", "--get", "user.email", check=False)[0]
    return name != 0 or email != 0


def commit(
    worktree: Worktree,
    message: str,
    files: list[str],
    *,
    prefix: str,
    screen: Screen | HomeSecrets | None = None,
) -> str | None:
    """Commit `files` (paths relative to the worktree) on the worktree's branch; None if unchanged.

    Every file and the message pass `screen` first (with none given: still every PEM
    private key block), so a secret is never in a commit, not even one discarded later."""
    path = worktree.path
    screen = screen or Screen.of([])
    screen.check(message, f"the commit message for {', '.join(files)} in {path}")
    for name in files:
        with contextlib.suppress(FileNotFoundError):  # a removed file has nothing to screen
            screen.check((path / name).read_bytes(), f"the file {path / name} to commit")
    on = _maybe(path, "symbolic-ref", "--quiet", "--short", "HEAD")
    if (
        on != worktree.branch
        or on in worktree.info.protected
        or not on.startswith(prefix + "/")
        or path.resolve() == Path(worktree.info.main_worktree).resolve()
    ):
        raise GitError(
            f"refusing to commit in {path} on {on or 'a detached HEAD'}: the backpass only "
            f"commits on its own {prefix}/… branch in its own worktree, never on "
            f"{', '.join(worktree.info.protected)}"
        )
    git(path, "add", "--", *files)
    if git(path, "diff", "--cached", "--quiet", check=False)[0] == 0:
        return None
    git(path, "commit", "--quiet", "-m", message, identity=_needs_identity(path))
    worktree.commits += 1
    return _text(path, "rev-parse", "HEAD")


def discard(worktree: Worktree) -> None:
    """Remove a worktree this run made and delete its branch; used when a step fails."""
    git(worktree.repo, "worktree", "remove", "--force", str(worktree.path), check=False)
    if worktree.branch not in worktree.info.protected:
        git(worktree.repo, "branch", "-D", worktree.branch, check=False)
    git(worktree.repo, "worktree", "prune", check=False)


def release(worktree: Worktree) -> None:
    """Remove a worktree whose work is committed; its branch stays for review."""
    git(worktree.repo, "worktree", "remove", str(worktree.path))

"""The one way bullpen runs git: on a repository whose own files may name commands.

A grind's clone is written by a code seat and by the model-written code under
test; a memory repository by whoever holds the home's rights. Git runs
commands such files name (a filter driver, `diff.external`, `core.fsmonitor`,
`gpg.program`, a textconv, a merge driver, hooks, `core.sshCommand`, …), and
the grinder and the backpass run git *outside* every fence. So every git call
in bullpen goes through `git()` here, which:

- runs with no configuration the repository's writer can reach but its own
  `.git/config`: no system or global config (GIT_CONFIG_NOSYSTEM,
  GIT_CONFIG_GLOBAL=/dev/null), no global attributes, no inherited GIT_*
  variable, no pager, editor or askpass;
- first checks the repository git would find (`check_repo`): each of its
  config files holds only keys of the allow-list (agents/git/guard.py), and
  no attributes file (`.gitattributes` anywhere in the tree, `info/attributes`)
  names a filter, diff or merge driver. A repository that fails raises
  PlantedConfig naming the key and the file, and git is not run;
- sets, belt and braces, the dangerous keys on the command line, where they win
  over the repository: hooks off, fsmonitor off, no signing, no transport but
  local files, no implicit bare repository, no submodule recursion, and
  `--no-ext-diff --no-textconv` on every diff, log and show;
- stops a git that overruns by killing the process group of the one child this
  module started, never by a name or pattern.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
from pathlib import Path

from agents.git.guard import Planted, attributes_refusal, config_refusal
from room.errors import StepFailed

__all__ = [
    "GIT_TIMEOUT_S",
    "IDENTITY",
    "GitError",
    "PlantedConfig",
    "check_attributes",
    "check_config",
    "check_gitdir",
    "check_repo",
    "clone",
    "git",
    "git_argv",
    "git_at",
    "git_env",
]

GIT_TIMEOUT_S = 120.0
IDENTITY = ("-c", "user.name=bullpen", "-c", "user.email=bullpen@localhost")
# On the command line, so they win over anything the repository's own config says.
SAFE = tuple(
    part
    for setting in (
        "core.hooksPath=/dev/null",
        "core.fsmonitor=false",
        "core.attributesFile=/dev/null",
        "core.pager=cat",
        "core.editor=false",
        "core.sshCommand=false",
        "commit.gpgSign=false",
        "tag.gpgSign=false",
        "log.showSignature=false",
        "gpg.program=false",
        "protocol.allow=never",
        "protocol.file.allow=always",  # a local clone of the build dir
        "safe.bareRepository=explicit",
        "submodule.recurse=false",
        "diff.ignoreSubmodules=all",
    )
    for part in ("-c", setting)
)
NO_DRIVERS = ("--no-ext-diff", "--no-textconv")
DIFFERS = ("diff", "log", "show")
MAX_FILE = 1024 * 1024  # a config or attributes file larger is refused, not read
_SKIP_IN_GITDIR = frozenset({"objects", "refs", "logs", "hooks", "rr-cache", "lfs"})
_DROP_ENV = ("PAGER", "EDITOR", "VISUAL", "SSH_ASKPASS", "SSH_AUTH_SOCK")
_listed: dict[tuple[str, int, int, int, int, int], list[str] | str] = {}


class GitError(StepFailed):
    """A git command failed or a safety rule refused it; the message says which and why."""

    code = "git"


class PlantedConfig(GitError):
    """A repository's own files name a command bullpen's git would run, or a work tree holds
    what its git may not read or commit (agents/git/apart.py): nothing was run."""

    code = "git_planted"

    def __init__(self, repo: Path, planted: Planted) -> None:
        self.repo, self.planted = repo, planted
        why = ""  # a work tree's `.git` or staged path says why in its own words
        if planted.kind == "file":
            why = ", which bullpen's git cannot check"
        elif planted.kind in ("config", "attributes"):
            why = ", which names a command git would run; bullpen's git runs nothing a "
            why += "repository names"
        super().__init__(
            f"{repo}: its {planted.what} (in {planted.place}){why}, so nothing was run. "
            f"{_fix(repo, planted)}"
        )


def _fix(repo: Path, planted: Planted) -> str:
    if planted.kind == "config":
        return (
            f"Remove it (git config --file {repo / planted.place} --unset-all {planted.key}), "
            "or keep it in your global config, which bullpen's git never reads, and run again"
        )
    if planted.kind == "attributes":
        return f"Remove {planted.key} from {repo / planted.place} and run again"
    return f"Look at {repo / planted.place} by hand and run again"


def git_env() -> dict[str, str]:
    """Ours, minus every GIT_* variable and pager/editor/askpass, plus no config but the repo's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k not in _DROP_ENV}
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
        }
    )
    return env


def git_argv(repo: Path, *args: str, identity: bool = False) -> list[str]:
    """`git -C repo` with the safe settings (and the bullpen identity if asked)."""
    return _argv(["-C", str(repo)], args, identity)


def _argv(where: list[str], args: tuple[str, ...], identity: bool) -> list[str]:
    if args and args[0] in DIFFERS:
        args = (args[0], *NO_DRIVERS, *args[1:])
    return ["git", "--no-pager", *where, *SAFE, *(IDENTITY if identity else ()), *args]


def _run(argv: list[str], cwd: str | None, timeout: float, what: str) -> tuple[int, bytes, str]:
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=git_env(),
            start_new_session=True,  # its own process group: the one we may kill
        )
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH; install git") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # The child is not reaped yet, so its pid (and group id) cannot have been reused.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise GitError(
            f"{what} ran over {timeout:.0f} s and was stopped; check the repository (a lock "
            "waiting, a file that never ends?) and run again"
        ) from None
    return proc.returncode, out, err.decode("utf-8", "replace").strip()


def git(
    repo: Path,
    *args: str,
    check: bool = True,
    identity: bool = False,
    timeout: float = GIT_TIMEOUT_S,
) -> tuple[int, bytes, str]:
    """Run `git -C repo args…` on a checked repository; (exit code, stdout bytes, stderr text).

    PlantedConfig (nothing run) when the repository git would find names a command;
    `init` makes a new repository and checks nothing."""
    if not args or args[0] != "init":
        check_repo(repo)
    return git_at(["-C", str(repo)], str(repo), *args, check=check, identity=identity,
                  timeout=timeout)  # fmt: skip


def git_at(
    where: list[str],
    place: str,
    *args: str,
    check: bool = True,
    identity: bool = False,
    timeout: float = GIT_TIMEOUT_S,
) -> tuple[int, bytes, str]:
    """Run `git <where> args…` with the safe settings, the repository already checked by the
    caller (`where` names it: `-C repo`, or `--git-dir … --work-tree …`; `place` in messages)."""
    argv = _argv(where, args, identity)
    code, out, error = _run(argv, None, timeout, f"`git {' '.join(args)}` in {place}")
    if check and code != 0:
        raise GitError(f"`git {' '.join(args)}` in {place} failed (exit {code}): {error[:800]}")
    return code, out, error


def clone(source: Path, target: Path) -> None:
    """`git clone --no-hardlinks source target`, the source checked first."""
    check_repo(source)
    git(target.parent, "clone", "-q", "--no-hardlinks", str(source), str(target))


def _find(start: Path) -> tuple[Path, Path] | None:
    """(work tree, its `.git`) that git would find from `start`; None outside any repository."""
    here = Path(os.path.realpath(start))
    for folder in (here, *here.parents):
        dot = folder / ".git"
        if os.path.lexists(dot):
            return folder, dot
    return None


def _small_text(path: Path, follow: bool) -> str | None:
    """A regular file's text (at most MAX_FILE bytes), or None for anything else."""
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE:
        return None
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(MAX_FILE + 1).decode("utf-8", "replace")


def _unusable(tree: Path, path: Path, why: str) -> PlantedConfig:
    return PlantedConfig(tree, Planted(why, _relative(tree, path), "file"))


def _relative(tree: Path, path: Path) -> str:
    try:
        return str(path.relative_to(tree))
    except ValueError:
        return str(path)


def _git_dirs(tree: Path, dot: Path) -> tuple[Path, Path]:
    """The git dir and the common dir of a work tree's `.git` (a folder or a `gitdir:` file)."""
    if dot.is_dir():
        gitdir = Path(os.path.realpath(dot))
    else:
        text = _small_text(dot, follow=True)
        if text is None or not text.startswith("gitdir: "):
            raise _unusable(tree, dot, "a .git that is neither a folder nor a gitdir file")
        gitdir = Path(os.path.realpath(dot.parent / text.removeprefix("gitdir: ").strip()))
    common = gitdir
    if os.path.lexists(gitdir / "commondir"):
        text = _small_text(gitdir / "commondir", follow=True)
        if text is None:
            raise _unusable(tree, gitdir / "commondir", "a commondir that is not a small file")
        common = Path(os.path.realpath(gitdir / text.strip()))
    return gitdir, common


def _config_keys(path: Path) -> list[str] | str:
    """The keys a config file sets, in order (git's own parse), or why it cannot be read."""
    try:
        info = os.stat(path)
    except OSError:
        return []
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE:
        return "a git config that is not a regular file of at most 1 MiB"
    mark = (str(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    if mark in _listed:  # ctime moves on every write and cannot be set back
        return _listed[mark]
    argv = ["git", "--no-pager", "config", "--no-includes", "--file", str(path)]
    code, out, error = _run(
        [*argv, "--name-only", "--list", "-z"], "/", 30, f"reading the git config {path}"
    )
    keys: list[str] | str = (
        [key for key in out.decode("utf-8", "replace").split("\0") if key]
        if code == 0
        else f"a git config git cannot parse ({error[:200]})"
    )
    if len(_listed) > 256:
        _listed.clear()
    _listed[mark] = keys
    return keys


def check_config(top: Path, path: Path) -> None:
    keys = _config_keys(path)
    if isinstance(keys, str):
        raise _unusable(top, path, keys)
    planted = config_refusal(keys, _relative(top, path))
    if planted is not None:
        raise PlantedConfig(top, planted)


def check_attributes(top: Path, path: Path, follow: bool) -> None:
    if not os.path.lexists(path):
        return
    text = _small_text(path, follow)
    if text is None:
        if follow or not os.path.islink(path):  # git itself skips an in-tree symbolic link
            raise _unusable(top, path, "an attributes file that is not a regular file")
        return
    planted = attributes_refusal(text, _relative(top, path))
    if planted is not None:
        raise PlantedConfig(top, planted)


def check_gitdir(top: Path, gitdir: Path, common: Path) -> None:
    """Every config and attributes file git reads from the repository's own folders
    (a linked worktree's, a submodule's under modules/ included)."""
    for folder in dict.fromkeys((common, gitdir)):
        for where, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if d not in _SKIP_IN_GITDIR]
            here = Path(where)
            for name in files:
                if name in ("config", "config.worktree"):
                    check_config(top, here / name)
                elif name == "attributes" and here.name == "info":
                    check_attributes(top, here / name, follow=True)


def _check_tree(top: Path, tree: Path, dot: Path, depth: int) -> None:
    """One work tree and its git dir; a repository nested in the tree (git may run in it
    too) is checked the same way, every place named relative to `top`."""
    gitdir, common = _git_dirs(top, dot)
    check_gitdir(top, gitdir, common)
    for where, dirs, files in os.walk(tree):
        here = Path(where)
        if here != tree and ".git" in dirs + files:
            if depth >= 8:
                raise _unusable(top, here, "repositories nested more than 8 deep")
            _check_tree(top, here, here / ".git", depth + 1)
            dirs[:] = []  # that walk covered this folder's tree
            continue
        dirs[:] = [d for d in dirs if d != ".git"]
        if ".gitattributes" in files:
            check_attributes(top, here / ".gitattributes", follow=False)


def check_repo(start: Path) -> None:
    """Raise PlantedConfig when the repository git would find from `start` names a command:
    a config key outside the allow-list, or an attributes file naming a driver, in the
    repository or in a repository nested in its work tree. Nothing is run."""
    found = _find(start) if start.is_dir() else None
    if found is not None:
        _check_tree(found[0], found[0], found[1], 0)

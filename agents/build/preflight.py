"""What a build step needs on its own host, looked at before a ticket is posted.

`bullpen build` asks @sandbox, @testdesigner and the spec's grinder a pre-flight
(agents/build/placement.py); each lurker answers it itself with this module's view of
the host it runs on (agents/runtime/preflight.py), and the step never runs:

- the build root: a folder this nick may write (every step writes under it: the
  scaffold, the red check's clone, the grind's clone), and which folder it is
  (`place`: device, inode, mtime), so two nicks' views can be told to be one folder or
  two (`same_place`), even where both hosts call it by the same path;
- REPO as this nick sees it: found or not, and the commit a step would start from.
  @sandbox, which prepares it, holds it to the step's own rules (resolve_repo);
- the tools its step runs for the spec's language: git for every step; for the spec
  and grind steps the runner and its syntax check (`[build] runners` wins over the
  table), pytest for Python, a browser for a canvas game, and bubblewrap when `[build]
  fence = "bwrap"`. A tool is looked up on the lurker's own PATH, the one its unit gives
  it: what a step would start.

Nothing is written and no model is asked; each problem says what is missing and how
to fix it on that host.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.build.builddir import count_files, is_repo, resolve_repo
from agents.build.config import BuildConfig
from agents.build.fence import BWRAP, choose
from agents.build.routing import LANGUAGES, Language, by_name
from agents.build.webgame import BROWSERS, browser
from agents.git.safe import git
from room.errors import BullpenError, StepFailed

if TYPE_CHECKING:
    from agents.runtime.step import StepContext

__all__ = ["check", "same_place"]

ROLES = ("prepare", "spec", "grind")  # the step each build nick runs (agents/build/pipeline.py)


def files_travel(role: str) -> bool:
    """Whether the nick playing `role` may see another build root than @sandbox's: the one
    rule for "the grinder travels", which the pre-flight (here) and the placement check
    (agents/build/placement.py) both apply. A grinder may: the spec step hands it the build
    dir as a git bundle through the room's object store, and the green clone comes back the
    same way (agents/build/handoff.py). @testdesigner may not: it writes the spec into the
    build dir @sandbox made, so the two share the build root."""
    return role == "grind"


INSTALL = {  # how a missing tool is usually installed (Debian names); else the tool's own
    "git": "git",
    "go": "golang-go",
    "gofmt": "golang-go",
    "node": "nodejs",
    "bwrap": "bubblewrap",
    "chromium": "chromium",
}


def _problem(what: str, fix: str) -> dict[str, str]:
    return {"what": what, "fix": fix}


def place(path: str) -> dict[str, Any] | None:
    """Which folder `path` is on this host (its device, inode and mtime), or None."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return {"dev": found.st_dev, "ino": found.st_ino, "mtime_ns": found.st_mtime_ns}


def same_place(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two nicks' views of a folder (`place`, with their pong's `boot_id`) are one
    folder. On one running kernel, device and inode say it; across machines inode and mtime
    must both agree (a shared filesystem keeps both; two local folders hardly ever do)."""
    a, b = one.get("place"), other.get("place")
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    if one.get("boot_id") and one.get("boot_id") == other.get("boot_id"):
        return (a.get("dev"), a.get("ino")) == (b.get("dev"), b.get("ino"))
    return (a.get("ino"), a.get("mtime_ns")) == (b.get("ino"), b.get("mtime_ns"))


def _can_make(root: str) -> bool:
    """Whether this process could make the folder `root`: its nearest existing parent is a
    folder it may write."""
    parent = os.path.dirname(root)
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    return bool(parent) and os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK)


def _root_view(
    config: BuildConfig, host: str, role: str, nick: str
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    root = os.path.realpath(config.root)
    view = {"root": root, "place": place(root)}
    if not os.path.isdir(root) and files_travel(role) and _can_make(root):
        # a grinder's build dir comes to it through the object store when it does not see
        # @sandbox's: it makes its build root then (agents/build/handoff.py)
        return view, []
    if not os.path.isdir(root):
        fix = f"create it there (mkdir -p {config.root})"
        if role != "prepare":  # an empty folder here would not hold @sandbox's build dirs
            fix = (
                f"run @{nick} where @sandbox runs, or mount the build root @sandbox uses at "
                f"{config.root} on {host}"
            )
        return view, [_problem(f"the build root {config.root} is not a folder on host {host}", fix)]
    if not os.access(root, os.W_OK | os.X_OK):
        return view, [
            _problem(
                f"the build root {root} is not writable here",
                f"let the user this lurker runs as write it (chown or chmod {root})",
            )
        ]
    return view, []


def _repo_view(config: BuildConfig, repo: str) -> dict[str, Any]:
    """REPO as this host sees it: the folder, its commit (None: not a git repository yet)."""
    real = Path(os.path.realpath(repo))
    view: dict[str, Any] = {"repo": repo, "real": str(real), "found": real.is_dir()}
    if not view["found"]:
        return view
    try:
        if is_repo(real):
            code, out, _ = git(real, "rev-parse", "--verify", "HEAD", check=False)
            view["commit"] = out.decode().strip() if code == 0 else None
        else:
            view["commit"] = None
            view["files"] = count_files(real, config.max_files + 1)
    except BullpenError as exc:  # a planted config, a broken repository: the step's to say
        view["commit"] = None
        view["unreadable"] = exc.message
    return view


def _which(name: str) -> str | None:
    if os.path.isabs(name):
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name)  # the lurker's own PATH: what its steps would start


def _tool_fix(tool: str, host: str, nick: str) -> str:
    package = INSTALL.get(os.path.basename(tool), os.path.basename(tool))
    return (
        f"install it on host {host} (e.g. apt install {package}), or put the folder that holds "
        f"it on the PATH of @{nick}'s lurker (systemctl --user edit bullpen-lurker@{nick}: "
        "Environment=PATH=…), then restart that lurker"
    )


def tools(config: BuildConfig, language: Language, role: str) -> list[str]:
    """The programs `role` starts for a spec in `language` ({python}: this interpreter)."""
    wanted = ["git"]
    if role == "prepare":
        return wanted
    runner = config.runners.get(language.name) or list(language.runner)
    for argv in (runner, language.syntax_check):
        first = argv[0].replace("{python}", sys.executable)
        if first not in wanted:
            wanted.append(first)
    if config.fence == BWRAP:
        wanted.append("bwrap")
    return wanted


def _toolchain(
    config: BuildConfig, language: Language, role: str, host: str, nick: str
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    found: dict[str, str | None] = {tool: _which(tool) for tool in tools(config, language, role)}
    problems = [
        _problem(
            f"{os.path.basename(tool)} is not found on its PATH (a {language.name} spec needs "
            f"it{' for the build dir' if tool == 'git' else ''})",
            _tool_fix(tool, host, nick),
        )
        for tool, where in found.items()
        if where is None
    ]
    view: dict[str, Any] = {"tools": found}
    if role == "prepare":
        return view, problems
    runner = config.runners.get(language.name) or list(language.runner)
    pytest = language.name == "python" and runner[:3] == ["{python}", "-m", "pytest"]
    if pytest and importlib.util.find_spec("pytest") is None:
        problems.append(
            _problem(
                f"pytest is not installed in the interpreter bullpen runs on ({sys.executable})",
                f"{sys.executable} -m pip install pytest, then restart @{nick}",
            )
        )
    if language.name == "webgame":
        view["browser"] = browser()
        if view["browser"] is None:
            problems.append(
                _problem(
                    f"no browser for the canvas game's smoke test ({', '.join(BROWSERS)})",
                    _tool_fix("chromium", host, nick),
                )
            )
    try:
        view["fence"] = choose(config.fence)
    except RuntimeError as exc:
        problems.append(_problem(str(exc), ""))
    return view, problems


def check(role: str, request: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
    """This nick's view for a build whose spec is in `request["language"]` and whose build
    dir is `request["repo"]`: the build root, REPO and the tools, with every problem. With
    no language, only the build root: where the nick would build."""
    host = socket.gethostname()
    try:
        config = BuildConfig.of(ctx.home)
    except BullpenError as exc:
        return {"role": role, "problems": [_problem(exc.message, "fix society.toml on " + host)]}
    view, problems = _root_view(config, host, role, ctx.nick)
    view["role"] = role
    name = request.get("language")
    if name is None:  # where it runs and which build root it sees: `trust check --live`
        view["problems"] = problems
        return view
    if name not in {language.name for language in LANGUAGES}:
        what = f"the pre-flight names no language a build grinds ({str(name)[:40]!r})"
        return {"role": role, "problems": [_problem(what, "ask with bullpen build")]}
    language = by_name(str(name))
    repo = str(request.get("repo") or "")
    if repo.startswith("/"):
        view.update(_repo_view(config, repo))
        if role == "prepare":  # the step that makes the build dir: its own rules, here
            try:
                resolve_repo(config, repo)
            except StepFailed as exc:
                problems.append(_problem(exc.message, ""))
    tooling, missing = _toolchain(config, language, role, host, ctx.nick)
    view.update(tooling)
    view["problems"] = problems + missing
    return view


for_role = {role: functools.partial(check, role) for role in ROLES}

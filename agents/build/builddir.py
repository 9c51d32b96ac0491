"""The build-dir rules (§8.1): where a build dir may be, the alias, the scaffold, the clone.

A build dir must resolve (links followed) under `[build] root`, never under
/home or a system path: a model-written test and its fix run there. The
fixed alias (`[build] alias`, default /tmp/sandbox) is pointed at it
atomically (`ln -sfn`), so a ticket always says /tmp/sandbox/... . A dir
that is not a git repository is scaffolded: the stub targets as empty files
(a Go stub holds its package clause), `git init` and a baseline commit. A
dir with more than 50 files is refused unless it is a git repository, and a
git repository needs a baseline commit and a clean tree, or the diff
boundary would be wrong. A grind works in a throwaway clone
`<root>/grind-<UTC ts>/`; the build dir is never written by it.
"""

from __future__ import annotations

import ast
import os
import re
import secrets
import socket
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agents.build.config import BuildConfig
from agents.build.repomap import script_sources
from agents.build.routing import Language
from agents.build.ticket import system_reason
from agents.git.apart import clone_apart
from agents.git.safe import git
from agents.roots import Roots
from room.errors import StepFailed

__all__ = [
    "DirNotFound",
    "Prepared",
    "clone",
    "count_files",
    "infer_targets",
    "is_repo",
    "point_alias",
    "prepare",
    "resolve_repo",
]


def _text(repo: Path, *args: str) -> str:
    return git(repo, *args)[1].decode("utf-8", "replace").strip()


class DirNotFound(StepFailed):
    """REPO is not a folder on this host: made nowhere yet, or made on another host
    (agents/build/boundary.py says which, when the step knows who made it)."""


def resolve_repo(config: BuildConfig, repo: str) -> Path:
    """REPO with every link followed, refused unless a folder under the build root."""
    alias = os.path.normpath(config.alias)
    through_alias = repo == alias or repo.startswith(alias + "/")
    if through_alias and not os.path.lexists(alias):
        raise StepFailed(
            f"REPO {repo} goes through the alias {alias}, which points nowhere yet: name the "
            f"campaign's real dir once (REPO {config.root}/<slug>), and the sandbox step points "
            f"the alias at it; or point it yourself: ln -sfn {config.root}/<slug> {alias}"
        )
    real = Path(os.path.realpath(repo))
    reason = system_reason(str(real))
    if reason is not None:
        raise StepFailed(f"refused REPO {repo}: {reason}")
    root = Path(os.path.realpath(config.root))
    Roots.single("build", root).check("build", real, "the REPO")
    if real == root:
        raise StepFailed(
            f"refused REPO {repo}: it is the build root itself ({root}); give each campaign "
            f"its own folder, e.g. {root}/my-campaign"
        )
    if not real.is_dir():
        raise DirNotFound(
            f"REPO {repo} ({real}) is not a folder on host {socket.gethostname()}: DIR NOT "
            f"FOUND. Create it on this host (mkdir -p {root}/<slug>) and point the alias at it "
            f"(ln -sfn {root}/<slug> {config.alias})",
            repo=repo,
            real=str(real),
        )
    return real


def point_alias(config: BuildConfig, real: Path) -> None:
    """`ln -sfn real alias`, atomically: a new link beside it, renamed over it."""
    alias = Path(config.alias)
    if alias.exists() and not alias.is_symlink():
        raise StepFailed(
            f"the alias {alias} is a real file or folder, not a link; move it away so it can "
            f"point at the campaign's dir ({real})"
        )
    if alias.is_symlink() and os.readlink(alias) == str(real):
        return
    alias.parent.mkdir(parents=True, exist_ok=True)
    temp = alias.with_name(f".{alias.name}.{secrets.token_hex(4)}")
    os.symlink(real, temp)
    os.replace(temp, alias)


def is_repo(folder: Path) -> bool:
    code, out, _ = git(folder, "rev-parse", "--show-toplevel", check=False)
    return code == 0 and Path(out.decode().strip()).resolve() == folder


def count_files(folder: Path, limit: int) -> int:
    count = 0
    for _, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != ".git"]
        count += len(files)
        if count > limit:
            break
    return count


def infer_targets(
    language: Language, spec_relative: str, spec_text: str, folder: Path
) -> list[str]:
    """The stub targets a spec's imports name, where that is unambiguous; [] otherwise."""
    spec_dir = os.path.dirname(spec_relative)
    found: list[str] = []
    if language.name == "python":
        try:
            tree = ast.parse(spec_text)
        except SyntaxError:
            return []
        names: list[str] = []
        for node in tree.body:
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.append(node.module)
        for name in names:
            top = name.split(".")[0]
            if "." in name or top in sys.stdlib_module_names or top in ("pytest", "conftest"):
                continue
            if not (folder / f"{top}.py").exists() and not (folder / top).is_dir():
                found.append(f"{top}.py")
    elif language.name == "js":
        for spec in re.findall(r"""(?:require\(\s*|from\s+)['"](\.\.?/[^'"]+)['"]""", spec_text):
            target = os.path.normpath(os.path.join(spec_dir, spec))
            target += "" if os.path.splitext(target)[1] else ".js"
            if not target.startswith("..") and not (folder / target).exists():
                found.append(target)
    elif language.name == "webgame":
        for source in script_sources(spec_text):
            target = os.path.normpath(os.path.join(spec_dir, source))
            if not target.startswith("..") and not (folder / target).exists():
                found.append(target)
    elif language.name == "go":
        package = re.search(r"^package\s+(\w+)", spec_text, re.M)
        here = folder / spec_dir
        others = [p for p in here.glob("*.go") if not p.name.endswith("_test.go")]
        if package and not others:
            found.append(os.path.join(spec_dir, f"{package[1].removesuffix('_test')}.go"))
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class Prepared:
    build_dir: Path
    baseline: str
    scaffolded: bool
    stubs: list[str]
    files: int


def _stub(folder: Path, target: str, language: Language, spec_text: str) -> bool:
    path = (folder / target).resolve()
    Roots.single("build", folder).check("build", path, "a stub target")
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(language.stub(target, spec_text), encoding="utf-8")
    return True


def prepare(
    config: BuildConfig,
    real: Path,
    language: Language,
    spec_relative: str,
    targets: list[str],
) -> Prepared:
    """Check and scaffold the build dir; the baseline commit it names is the diff boundary."""
    if is_repo(real):
        code, _, _ = git(real, "rev-parse", "--verify", "HEAD", check=False)
        if code != 0:
            raise StepFailed(
                f"the build dir {real} is a git repository without a commit: commit the "
                "baseline first (git add -A && git commit -m baseline); it is the diff boundary"
            )
        dirty = _text(real, "status", "--porcelain")
        if dirty:
            first = dirty.splitlines()[0]
            raise StepFailed(
                f"the build dir {real} has uncommitted changes ({first.strip()} and "
                f"{len(dirty.splitlines()) - 1} more): commit or stash them first, or the diff "
                "boundary of the grind would be wrong"
            )
        return Prepared(real, _text(real, "rev-parse", "HEAD"), False, [], count_files(real, 10**9))
    files = count_files(real, config.max_files)
    if files > config.max_files:
        raise StepFailed(
            f"the build dir {real} holds more than {config.max_files} files and is not a git "
            "repository: a scaffold is for a build from scratch. Make it a git repository "
            "with a baseline commit (a fix-existing-code campaign), or use an empty folder"
        )
    spec = real / spec_relative
    spec_text = spec.read_text(encoding="utf-8", errors="replace") if spec.is_file() else ""
    wanted = targets or infer_targets(language, spec_relative, spec_text, real)
    if language.name == "go" and not (real / "go.mod").exists():
        (real / "go.mod").write_text(f"module {_module_name(real)}\n\ngo 1.18\n", encoding="utf-8")
    stubs = [target for target in wanted if _stub(real, target, language, spec_text)]
    git(real, "init", "-q")
    git(real, "add", "-A")
    git(real, "commit", "-q", "--allow-empty", "-m", "baseline: scaffold", identity=True)
    return Prepared(real, _text(real, "rev-parse", "HEAD"), True, stubs, files + len(stubs))


def _module_name(folder: Path) -> str:
    return re.sub(r"[^a-z0-9_.-]", "-", folder.name.lower()) or "build"


def clone(config: BuildConfig, build_dir: Path) -> Path:
    """A throwaway clone `<root>/grind-<UTC ts>/` of the build dir's HEAD, not hardlinked; its
    git directory is `grind-<UTC ts>.git` beside it, never inside (agents/git/apart.py)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    target = Path(os.path.realpath(config.root)) / f"grind-{stamp}"
    clone_apart(build_dir, target)
    return target

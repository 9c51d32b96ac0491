"""A private copy of what a file-writing step reads and writes, so its replay writes none of the run's.

A step such as the brief, a backpass step or a build step writes under the
home's roots (a run folder, the briefs folder, memory repositories, a build
directory). Its replay runs against a copy instead: every path the step's
ask names that lies under the home or one of its roots is copied into a
temporary folder, mirrored by its absolute path (`<copy>/fs/<path>`), and
the step sees a home whose root, sections and ask point there. Whatever it
writes lands in the copy, which is compared before and after and removed.

Paths are input (the ask is data from a poster): each is resolved and must
lie inside the home or a configured root, and is copied by the one safe copy
(agents/intake/safecopy.py): a link that leads out of what is copied is
refused rather than followed, every named path is planned and the sizes
summed (apparent and allocated, so a sparse file counts what a copy would
write) against MAX_COPY_BYTES before a byte is written, and a git pointer (`.git` files,
worktree `gitdir`s) is re-pointed at the copy or refused, so no git command
in the replay reaches the original repository. A folder that holds one
folder per run (the backpass's runs root) is copied with only this run's.
Files are copied, never hard-linked, so a write in the copy cannot reach the
original through a shared inode.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.intake.safecopy import MAX_COPY_BYTES, Plan, copy_planned, plan_tree, refuse_size
from agents.roots import inside
from room.errors import UsageError

if TYPE_CHECKING:
    from agents.home import Home

SKIPPED = frozenset({"__pycache__"})


def _is_path(value: str) -> bool:
    return value.startswith("/") and "\n" not in value and len(value) < 4096


@dataclass
class Copied:
    """One path copied: where it was, and how much of it."""

    source: Path
    files: int = 0
    bytes: int = 0
    allocated: int = 0  # what the original takes on disk (a sparse file: less than bytes)
    narrowed_to: str | None = None  # the run's own folder, when only it was copied

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"path": str(self.source), "files": self.files, "bytes": self.bytes}
        if self.narrowed_to:
            row["only"] = self.narrowed_to
        return row


@dataclass
class PrivateCopy:
    """The temporary folder, the prefixes mapped into it, and what was copied."""

    folder: Path
    allowed: list[Path]  # the home and its roots: the only places a named path may lie
    thread_folder: str  # this run's folder name under a root of per-run folders
    copied: list[Copied] = field(default_factory=list)
    mapped: list[Path] = field(default_factory=list)  # every prefix whose paths point in here
    left: list[str] = field(default_factory=list)  # named paths outside them, not copied

    @property
    def fs(self) -> Path:
        return self.folder / "fs"

    # --- the mapping -------------------------------------------------------------------

    def into(self, path: Path) -> Path:
        """Where `path` (absolute) lies in the copy."""
        return self.fs / path.relative_to(path.anchor)

    def outof(self, path: Path) -> Path:
        return Path("/") / path.relative_to(self.fs)

    def map_in(self, value: Any, *, resolve: bool = True) -> Any:
        """`value` with every string path under a mapped prefix pointed into the copy.

        An ask's paths are resolved first (what the step would touch); a setting's are not
        (the build's alias is a link the step replaces, not the folder it points at)."""
        if isinstance(value, str) and _is_path(value):
            given = Path(os.path.normpath(value))
            candidates = (Path(os.path.realpath(value)), given) if resolve else (given,)
            for candidate in candidates:
                if any(inside(prefix, candidate) for prefix in self.mapped):
                    return str(self.into(candidate))
            return value
        if isinstance(value, dict):
            return {k: self.map_in(v, resolve=resolve) for k, v in value.items()}
        if isinstance(value, list):
            return [self.map_in(v, resolve=resolve) for v in value]
        return value

    def map_out(self, value: Any) -> Any:
        """`value` with every path into the copy named as the original it stands for."""
        if isinstance(value, str):
            return value.replace(str(self.fs), "") if str(self.fs) in value else value
        if isinstance(value, dict):
            return {k: self.map_out(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.map_out(v) for v in value]
        return value

    # --- copying -----------------------------------------------------------------------

    def prepare(self) -> None:
        """Map the home and every root into the copy; each root's folder made there, empty."""
        for place in self.allowed:
            for each in (Path(os.path.normpath(place)), Path(os.path.realpath(place))):
                if each not in self.mapped:
                    self.mapped.append(each)
            if place.is_dir() and not place.is_symlink():
                self.into(Path(os.path.realpath(place))).mkdir(parents=True, exist_ok=True)

    def copy(self, path: Path) -> None:
        """Copy one named path (file or folder) into the copy, once."""
        self.copy_all([path])

    def copy_all(self, paths: Iterable[Path]) -> None:
        """Copy the named paths (files or folders) by the one safe copy
        (agents/intake/safecopy.py): every one is planned first, and the whole, with what
        is copied already, is held to MAX_COPY_BYTES before a byte is written."""
        planned: list[tuple[Copied, Plan]] = []
        for path in paths:
            real = Path(os.path.realpath(path))
            if not any(inside(place, real) for place in self.mapped):
                self.left.append(str(path))  # outside the home and its roots: read, never written
                continue
            if not os.path.lexists(real):  # to be written: its folder is made, empty, in the copy
                if real.parent.is_dir():
                    self.into(real.parent).mkdir(parents=True, exist_ok=True)
                continue
            if any(inside(c.source, real) for c, _ in planned) or any(
                inside(c.source, real) for c in self.copied
            ):
                continue  # already inside something copied
            planned = [(c, p) for c, p in planned if not inside(real, c.source)]
            self.copied = [c for c in self.copied if not inside(real, c.source)]
            entry, source = Copied(real), real
            own = real / self.thread_folder
            if self.thread_folder and own.is_dir() and not own.is_symlink():
                entry.narrowed_to = self.thread_folder  # a root of per-run folders: this run's
                source = own
            plan = plan_tree(source, what="the replay", within=real, skip=SKIPPED, limit=2**63)
            planned.append((entry, plan))
        apparent = sum(c.bytes for c in self.copied) + sum(p.apparent for _, p in planned)
        allocated = sum(c.allocated for c in self.copied) + sum(p.allocated for _, p in planned)
        if max(apparent, allocated) > MAX_COPY_BYTES:
            where = ", ".join(str(c.source) for c, _ in planned)
            raise refuse_size(where, apparent, allocated, MAX_COPY_BYTES, "the replay")
        for entry, plan in planned:
            copy_planned(plan, self.into(plan.source), place=self.into)
            entry.files, entry.bytes, entry.allocated = plan.files, plan.apparent, plan.allocated
            self.copied.append(entry)

    def repoint_git(self) -> None:
        """Every git pointer in the copy re-pointed at the copy, or the replay refused."""
        for entry in self.copied:
            top = self.into(entry.source)
            for place, dirs, files in os.walk(top):
                dirs[:] = [d for d in dirs if d not in SKIPPED]
                here = Path(place)
                if ".git" in files:
                    self._repoint(here / ".git", "gitdir: ")
                if here.name == "worktrees" and here.parent.name == ".git":
                    for worktree in dirs:
                        self._repoint(here / worktree / "gitdir", "")

    def _repoint(self, pointer: Path, prefix: str) -> None:
        text = pointer.read_text(encoding="utf-8", errors="replace").strip()
        if not text.startswith(prefix):
            return
        named = text[len(prefix) :]
        if os.path.isabs(named):
            original = Path(os.path.normpath(named))
        else:
            original = Path(os.path.normpath(self.outof(pointer.parent) / named))
        if not any(inside(c.source, original) for c in self.copied):
            raise UsageError(
                f"the git pointer {self.outof(pointer)} leads to {original}, outside what the "
                "replay copies; a git command there would write the original repository, so "
                "this step is not replayed"
            )
        if os.path.isabs(named):
            pointer.write_text(prefix + str(self.into(original)) + "\n", encoding="utf-8")

    # --- before and after --------------------------------------------------------------

    def snapshot(self) -> dict[str, tuple[str, int]]:
        """Every file and link in the copy (path as the original would be) -> its digest and
        its modification time (a file rewritten with the same bytes was written too)."""
        found: dict[str, tuple[str, int]] = {}
        for place, dirs, files in os.walk(self.fs):
            dirs.sort()
            for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(place, d)))]:
                path = Path(place) / name
                with contextlib.suppress(OSError):
                    when = path.lstat().st_mtime_ns
                    if path.is_symlink():
                        found[str(self.outof(path))] = ("link:" + os.readlink(path), when)
                    elif path.is_file():
                        found[str(self.outof(path))] = (_digest(path), when)
        return found

    def summary(self) -> dict[str, Any]:
        return {
            "copied": [c.to_dict() for c in self.copied],
            "files": sum(c.files for c in self.copied),
            "bytes": sum(c.bytes for c in self.copied),
            "not_copied": sorted(set(self.left)),
        }


def _digest(path: Path) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def changes(
    before: dict[str, tuple[str, int]], after: dict[str, tuple[str, int]]
) -> dict[str, list[str]]:
    """What the replayed step wrote in the copy: files created, changed, rewritten with the
    same bytes, and removed."""
    both = set(after) & set(before)
    return {
        "created": sorted(set(after) - set(before)),
        "changed": sorted(p for p in both if after[p][0] != before[p][0]),
        "rewritten": sorted(
            p for p in both if after[p][0] == before[p][0] != "" and after[p] != before[p]
        ),
        "deleted": sorted(set(before) - set(after)),
    }


def named_paths(value: Any) -> list[str]:
    """Every absolute path an ask's data names (strings that look like one)."""
    if isinstance(value, str):
        return [value] if _is_path(value) else []
    if isinstance(value, dict):
        return [p for v in value.values() for p in named_paths(v)]
    if isinstance(value, list):
        return [p for v in value for p in named_paths(v)]
    return []


@contextlib.contextmanager
def private_copy(allowed: list[Path], thread_folder: str) -> Iterator[PrivateCopy]:
    """A fresh temporary copy folder, removed after (with whatever the step wrote in it)."""
    folder = Path(tempfile.mkdtemp(prefix="bullpen-replay-copy-"))
    try:
        made = PrivateCopy(folder, [Path(os.path.normpath(p)) for p in allowed], thread_folder)
        made.prepare()
        yield made
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def allowed_places(home: Home) -> list[Path]:
    """The home and every root its society.toml configures: where a copied path may lie."""
    from agents.config import ROOT_DEFAULTS

    society = home.society
    found = [home.root, *(home.root / folder for folder in ROOT_DEFAULTS.values())]
    for purpose in ROOT_DEFAULTS:
        for value in society.roots.declared(purpose) or []:
            found.append(home.path(value))
    for section in (society.expedition, society.backpass):
        for value in section.values():
            if isinstance(value, str) and ("/" in value or value.startswith(("~", "."))):
                found.append(home.path(value))
    for key in ("root", "alias"):
        setting = society.build.get(key)
        found.append(Path(setting) if isinstance(setting, str) else _build_default(key))
    return [p for p in dict.fromkeys(found) if str(p) not in ("/", "")]


def _build_default(key: str) -> Path:
    from agents.build.config import BuildConfig

    return Path(str(getattr(BuildConfig(), key)))

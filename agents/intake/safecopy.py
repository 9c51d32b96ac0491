"""The one copy of a folder someone handed bullpen: links that leave refused, sizes bounded first.

An eval suite's knowledge base, traces, memory repositories and starting
files, and a replay's run folders, are copied before a pipeline works on
them; whoever made them could have put a link to the operator's secrets in
them (a trace that is a link to `secrets/post-secret` would go into a model's
prompt), or a sparse file that is 1.5 GiB to a copy and a few bytes on disk.
So a copy is made in two passes:

1. the plan: the whole tree is walked without following a link (an explicit
   stack, so no nesting exhausts Python's), every link is resolved and
   refused when it leads out of the folder, and the sizes are summed, both
   apparent (st_size, what a copy writes) and allocated (st_blocks × 512);
   over the bound, the copy is refused with the figure before a byte is written;
2. the copy of exactly what was planned: each file opened without following
   a link and checked to be the regular file it was, copied into a new inode
   (never a hard link, so a write in the copy cannot reach the original), at
   most the size it was planned with (one that grew meanwhile is refused).

A link that stays inside is kept as a link, pointing at the copy's own file.
Sockets, FIFOs and devices are not copied. A refusal is a CopyRefused, a
UsageError (exit 2) naming the path.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from agents.roots import inside
from room.errors import UsageError

__all__ = [
    "MAX_COPY_BYTES",
    "MAX_COPY_ENTRIES",
    "CopyRefused",
    "Plan",
    "copy_planned",
    "copy_tree",
    "plan_tree",
]

MAX_COPY_BYTES = 512 * 1024 * 1024  # a copy is what one case or one step touches, never a disk
MAX_COPY_ENTRIES = 200_000  # files, folders and links of one copy
_READ = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK  # a FIFO must not hang it
_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_BLOCK = 1 << 20


class CopyRefused(UsageError):
    """A folder that cannot be copied safely: a link out, too large, or changed meanwhile."""

    code = "copy_refused"


@dataclass(frozen=True)
class _Entry:
    relative: PurePath  # under the plan's source
    kind: str  # "dir", "file" or "link"
    size: int = 0  # a file's apparent size
    mode: int = 0o644
    lands: Path | None = None  # where a link leads (resolved, inside)
    absolute: bool = False  # a link written with an absolute target


@dataclass
class Plan:
    """What a copy of `source` will write: its entries, and how much."""

    source: Path  # resolved
    within: Path  # the folder no link may leave (the source, or one holding it)
    what: str
    entries: list[_Entry] = field(default_factory=list)
    apparent: int = 0  # bytes the copy writes
    allocated: int = 0  # bytes the original takes on disk

    @property
    def files(self) -> int:
        return sum(1 for e in self.entries if e.kind == "file")

    @property
    def largest(self) -> int:
        """The bigger of the two sums: what is checked against a bound."""
        return max(self.apparent, self.allocated)


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


def refuse_size(
    where: str | Path, apparent: int, allocated: int, limit: int, what: str
) -> CopyRefused:
    """The refusal of a copy over `limit`, with both figures and the bound."""
    return CopyRefused(
        f"{what} would copy {_size(max(apparent, allocated))} from {where} ({apparent} bytes "
        f"apparent, {allocated} allocated on disk), over its bound of {_size(limit)}; nothing "
        "was copied: hand it a smaller folder",
        path=str(where),
    )


def plan_tree(
    source: Path,
    *,
    what: str,
    within: Path | None = None,
    skip: Iterable[str] = (),
    limit: int = MAX_COPY_BYTES,
    spent: int = 0,
) -> Plan:
    """The plan of a copy of `source` (a folder or a file), or CopyRefused: a link leading
    out of `within` (default: the source itself), more than `limit` bytes (`spent` already
    used by earlier copies counted), or more than MAX_COPY_ENTRIES entries."""
    top = Path(os.path.realpath(source))
    plan = Plan(top, Path(os.path.realpath(within)) if within else top, what)
    skipped = frozenset(skip)
    info = os.lstat(top)
    if not stat.S_ISDIR(info.st_mode):
        _add(plan, top, PurePath(), info)
    else:
        stack = [PurePath()]
        while stack:
            relative = stack.pop()
            folder = top / relative
            plan.entries.append(_Entry(relative, "dir", mode=os.lstat(folder).st_mode))
            for name in sorted(os.listdir(folder), reverse=True):
                if name in skipped:
                    continue
                item = relative / name
                found = os.lstat(top / item)
                if stat.S_ISDIR(found.st_mode):
                    stack.append(item)
                else:
                    _add(plan, top / item, item, found)
                if len(plan.entries) + len(stack) > MAX_COPY_ENTRIES:
                    raise CopyRefused(
                        f"{what} would copy more than {MAX_COPY_ENTRIES} files and folders from "
                        f"{top}; nothing was copied: hand it a smaller folder",
                        path=str(top),
                    )
    if spent + plan.largest > limit:
        raise refuse_size(top, spent + plan.apparent, spent + plan.allocated, limit, what)
    return plan


def _add(plan: Plan, path: Path, relative: PurePath, info: os.stat_result) -> None:
    if stat.S_ISLNK(info.st_mode):
        pointed = os.readlink(path)
        lands = Path(os.path.realpath(path))
        if not inside(plan.within, lands):
            raise CopyRefused(
                f"{path} is a link to {lands}, outside the folder {plan.within}; {plan.what} "
                "does not follow links out of what it copies, so nothing was copied: replace "
                "the link with the file itself, or remove it",
                path=str(path),
            )
        plan.entries.append(_Entry(relative, "link", lands=lands, absolute=os.path.isabs(pointed)))
    elif stat.S_ISREG(info.st_mode):
        plan.entries.append(_Entry(relative, "file", size=info.st_size, mode=info.st_mode))
        plan.apparent += info.st_size
        plan.allocated += info.st_blocks * 512
    # sockets, FIFOs and devices are not copied: nothing handed to a pipeline is one


def copy_planned(plan: Plan, target: Path, place: Callable[[Path], Path] | None = None) -> None:
    """Write exactly what `plan` holds at `target`. A link that stays inside is kept: an
    absolute one pointed at `place(lands)` (default: the same spot under `target`), a
    relative one at the same file by a relative path."""
    where = place or (lambda lands: target / lands.relative_to(plan.source))
    for entry in plan.entries:
        there = target / entry.relative if entry.relative.parts else target
        original = plan.source / entry.relative if entry.relative.parts else plan.source
        if entry.kind == "dir":
            there.mkdir(parents=True, exist_ok=True)
            continue
        there.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(there):  # a copy over an earlier one (a replay's): never through it
            os.unlink(there)
        if entry.kind == "file":
            _copy_file(original, there, entry, plan.what)
        elif entry.lands is not None:
            if entry.absolute:
                os.symlink(str(where(entry.lands)), there)
            else:
                os.symlink(os.path.relpath(entry.lands, original.parent), there)


def _copy_file(source: Path, target: Path, entry: _Entry, what: str) -> None:
    try:
        fd = os.open(source, _READ)
    except OSError as exc:
        raise CopyRefused(
            f"{what} could not open {source} to copy it ({exc.strerror}): it changed while "
            "being copied, or is no longer a plain file; nothing more was copied",
            path=str(source),
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CopyRefused(
                f"{source} is no longer a plain file; {what} copies what it planned, so it stopped",
                path=str(source),
            )
        out = os.open(target, _WRITE, 0o600)
        try:
            copied = 0
            while chunk := os.read(fd, min(_BLOCK, entry.size + 1 - copied)):
                copied += len(chunk)
                if copied > entry.size:
                    raise CopyRefused(
                        f"{source} grew while {what} copied it (planned at {entry.size} "
                        "bytes); it stopped rather than copy more than it measured",
                        path=str(source),
                    )
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
            os.fchmod(out, stat.S_IMODE(entry.mode) & 0o777)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def copy_tree(
    source: Path,
    target: Path,
    *,
    what: str,
    skip: Iterable[str] = ("__pycache__",),
    limit: int = MAX_COPY_BYTES,
) -> Plan:
    """Plan and copy `source` (a folder or a file) to `target`, a new path (an existing one,
    or a link there, is never written through); its plan, or CopyRefused before anything
    is written."""
    if os.path.lexists(target):
        raise CopyRefused(
            f"{target} already exists; {what} copies only into a new folder", path=str(target)
        )
    plan = plan_tree(source, what=what, skip=skip, limit=limit)
    copy_planned(plan, target)
    return plan

"""`bullpen build`'s last step: the green artifact, on the host the command runs on.

The grinder hands the green clone on as a git bundle in the room's object
store, its SHA-256 in the final report (agents/build/handoff.py). Here:

- the clone is on this host at the artifact's commit (one host, or a shared
  path): nothing is copied, and the line says where it is;
- else the bundle is fetched, its hash checked, and unpacked at
  `<[build] root>/artifact-<commit>` (once: a second run finds it there);
- a missing or altered bundle, or none when the clone is not here, fails
  loud (exit 1) naming the step, the nick and the host.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agents.build.config import BuildConfig
from agents.build.handoff import handed, receive, sees
from agents.git.apart import Apart, apart_git
from agents.objects import here
from room.errors import BullpenError

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["bring_back"]

STEP = "artifact"


def _clone_here(report: dict[str, Any], commit: str | None, root: Path) -> Path | None:
    """The grind's clone, when it lies under this host's build root (at `commit`, when one
    is named): a path elsewhere is another host's, or another root's, even if it resolves."""
    clone = report.get("clone")
    if not isinstance(clone, str) or not clone:
        return None
    if not Path(os.path.realpath(clone)).is_relative_to(root):
        return None
    gitdir = report.get("gitdir") or f"{clone}.git"
    repo = Apart(Path(str(gitdir)), Path(clone))
    if not repo.gitdir.is_dir() or not repo.tree.is_dir():
        return None
    try:
        head = apart_git(repo, "rev-parse", "HEAD", check=False)
    except BullpenError:
        return None
    if head[0] != 0 or (commit is not None and head[1].decode().strip() != commit):
        return None
    return repo.tree


async def bring_back(home: Home, report: dict[str, Any], err: TextIO) -> int:
    """Say where the green artifact is on this host, fetching it if need be; 0, or 1 when it
    cannot be had (the line says why)."""
    art = handed(report.get("artifact"))
    try:
        root = Path(os.path.realpath(BuildConfig.of(home).root))
    except BullpenError as exc:
        err.write(f"[ARTIFACT FAILED — {exc.message}]\n")
        return 1
    here_now = _clone_here(report, art["commit"] if art else None, root)
    if here_now is not None:
        err.write(f"artifact: the green clone is on this host at {here_now}; nothing copied\n")
        return 0
    if art is None:
        why = report.get("artifact_problem") or "the grinder handed none on"
        err.write(
            f"[ARTIFACT FAILED — the green clone {report.get('clone')} is not under this "
            f"host's build root {root} (host {here()}) and no artifact can be fetched: {why}]\n"
        )
        return 1
    commit = str(art["commit"])
    operator = home.society.operator
    try:
        dest = root / f"artifact-{commit[:12]}"
        if dest.exists() and sees(dest, commit):
            err.write(f"artifact: already fetched, at {dest} (commit {commit[:12]})\n")
            return 0
        if dest.exists():
            raise BullpenError(f"{dest} exists but is not commit {commit[:12]}; move it away")
        await receive(home, operator, STEP, art, dest)
    except BullpenError as exc:
        err.write(
            f"[ARTIFACT FAILED — @{operator} on host {here()} could not fetch the green clone "
            f"handed on by @{art.get('nick')} on host {art.get('host')}: {exc.message}]\n"
        )
        return 1
    err.write(
        f"artifact: bundle {art['sha256']} ({art.get('bytes')} bytes) from @{art.get('nick')} "
        f"on host {art.get('host')} fetched, SHA-256 verified, unpacked at {dest} "
        f"(commit {commit[:12]}, branch build)\n"
    )
    return 0

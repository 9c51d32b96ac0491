"""What one build step hands the next across a host boundary: a git bundle, by SHA-256.

    hand_on   git bundle of HEAD, put in the room's object store; the hand-on's data
              {sha256, bytes, commit, nick, host, step} goes in the reply that hands it on
    receive   fetch it, check its hash (room/objects.py), unpack it under a root
    sees      whether a repository here already holds that commit at that path

@testdesigner hands the build dir (baseline and spec) to the grinder; the
grinder hands the green clone back to `bullpen build`. The room line that
names the SHA-256 is Merkle-logged, so the room vouches for the bytes. On
one host the receiving side sees the path at the commit and copies nothing.

The bundle is hostile input (a seat wrote the spec; a compromised step could
send anything): it is fetched only into a fresh repository with
`fetch.fsckObjects`, must hold exactly the named commit, and its tree is
read before anything is checked out: no gitlink, no `.git` entry, no link
that leaves the tree, at most MAX_FILES files and `[objects] max_bytes` ×
UNPACKED_FACTOR bytes. It is unpacked beside its place and renamed in, so a
refusal leaves nothing. The unpacked repository is a build dir like any
other; the grind still clones it with its git directory apart.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.git.apart import Apart, apart_git
from agents.git.safe import git, git_at
from agents.objects import here, objects_for
from room.errors import BullpenError, StepFailed
from room.objects import is_name

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["HandOffRefused", "hand_on", "handed", "receive", "sees", "try_hand_on"]

UNPACKED_FACTOR = 4  # a tree may unpack to this many times the bound on the bundle
MAX_FILES = 20_000
_FSCK = ("-c", "fetch.fsckObjects=true", "-c", "transfer.fsckObjects=true")


class HandOffRefused(StepFailed):
    code = "handoff_refused"


def handed(value: Any) -> dict[str, Any] | None:
    """A hand-on's data from an ask or reply, or None when it names none (or not properly)."""
    if not isinstance(value, dict):
        return None
    if not is_name(value.get("sha256")) or not is_name_commit(value.get("commit")):
        return None
    return value


def is_name_commit(value: Any) -> bool:
    return (
        isinstance(value, str) and len(value) == 40 and all(c in "0123456789abcdef" for c in value)
    )


def _text(out: bytes) -> str:
    return out.decode("utf-8", "replace").strip()


async def hand_on(home: Home, nick: str, step: str, repo: Path | Apart) -> dict[str, Any]:
    """Bundle `repo`'s HEAD (all its history), put it in the store; the hand-on's data."""
    with tempfile.TemporaryDirectory(prefix="bullpen-bundle-") as folder:
        bundle = Path(folder) / "handoff.bundle"
        if isinstance(repo, Apart):
            commit = _text(apart_git(repo, "rev-parse", "HEAD")[1])
            apart_git(repo, "bundle", "create", "-q", str(bundle), "HEAD")
        else:
            commit = _text(git(repo, "rev-parse", "HEAD")[1])
            git(repo, "bundle", "create", "-q", str(bundle), "HEAD")
        async with objects_for(home, nick, step) as store:
            size = bundle.stat().st_size
            if size > store.max_bytes:
                raise store.too_big(f"(a bundle of {commit})", size)
            sha = await store.put(bundle.read_bytes())
    return {
        "sha256": sha,
        "bytes": size,
        "commit": commit,
        "nick": nick,
        "host": here(),
        "step": step,
    }


async def try_hand_on(
    home: Home, nick: str, step: str, repo: Path | Apart
) -> tuple[dict[str, Any] | None, str | None]:
    """`hand_on`, or None and why not: a step whose next step shares its path needs no
    hand-on, so a store out of reach is said in the reply (and by the step that needed
    it), not a failure here."""
    try:
        return await hand_on(home, nick, step, repo), None
    except BullpenError as exc:  # the store out of reach, a token file missing, git failing
        return None, exc.message


def sees(path: Path, commit: str) -> bool:
    """Whether `path` is a repository on this host whose HEAD is `commit` (nothing to copy)."""
    if not path.is_dir():
        return False
    code, out, _ = git(path, "rev-parse", "--verify", "HEAD", check=False)
    return code == 0 and _text(out) == commit


def _refused(hand: dict[str, Any], asker: str, why: str) -> HandOffRefused:
    return HandOffRefused(
        f"the bundle {hand['sha256']} handed on by @{hand.get('nick')} on host "
        f"{hand.get('host')} (step {hand.get('step')}) was refused by {asker} on host "
        f"{here()}: {why}; nothing was unpacked"
    )


def _check_tree(repo: Path, commit: str, limit: int, hand: dict[str, Any], asker: str) -> None:
    """Read the commit's tree before checking it out: what it would write must stay inside."""
    listing = git(repo, "ls-tree", "-r", "-l", "-z", "--full-tree", commit)[1]
    total, files = 0, 0
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, _kind, obj, size = meta.split()
        path = raw_path.decode("utf-8", "replace")
        if any(part.lower() == ".git" for part in path.split("/")):
            raise _refused(hand, asker, f"it holds a .git entry ({path})")
        if mode == b"160000":
            raise _refused(hand, asker, f"it holds a gitlink ({path})")
        if mode == b"120000":
            target = _text(git(repo, "cat-file", "blob", obj.decode())[1])
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
            if target.startswith("/") or joined == ".." or joined.startswith("../"):
                raise _refused(hand, asker, f"its link {path} leaves the tree ({target})")
        files += 1
        total += int(size) if size.isdigit() else 0
        if files > MAX_FILES or total > limit:
            raise _refused(
                hand, asker, f"its tree is over {MAX_FILES} files or {limit} bytes unpacked"
            )


async def receive(home: Home, nick: str, step: str, hand: dict[str, Any], dest: Path) -> Path:
    """Fetch the hand-on, check its hash, and unpack it at `dest` (which must not exist):
    a repository with HEAD on branch `build` at the handed commit."""
    asker = f"@{nick} (step {step})"
    async with objects_for(home, nick, step) as store:
        data = await store.get(str(hand["sha256"]))
        limit = store.max_bytes * UNPACKED_FACTOR
    commit = str(hand["commit"])
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.incoming-", dir=dest.parent))
    try:
        bundle = work / "handoff.bundle"
        fd = os.open(bundle, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        heads = _text(git_at([], str(work), "bundle", "list-heads", str(bundle), check=False)[1])
        if f"{commit} HEAD" not in heads.splitlines():
            raise _refused(hand, asker, f"it does not hold the named commit {commit} as HEAD")
        tree = work / "tree"
        tree.mkdir()
        git(tree, "init", "-q")
        code, _, error = git(tree, *_FSCK, "fetch", "-q", str(bundle), "HEAD", check=False)
        if code != 0:
            raise _refused(hand, asker, f"git would not fetch it ({error[:300]})")
        if _text(git(tree, "rev-parse", "FETCH_HEAD")[1]) != commit:
            raise _refused(hand, asker, f"its HEAD is not the named commit {commit}")
        _check_tree(tree, commit, limit, hand, asker)
        git(tree, "checkout", "-q", "-B", "build", commit)
        os.rename(tree, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest

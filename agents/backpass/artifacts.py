"""Run artifacts handed from one backpass step to the next, on one host or across hosts.

The steps hand each other files in the run folder (runs/<thread>/): each trace's
analysis (step 2 to step 3), the items whose quotes held (3 to 4), the ledger (4 to 5).
On one host, or with a shared runs folder, the next step reads the file where the last
one wrote it. On another host it is not there: so each such file also goes into the
room's object store (agents/objects: the hub's, or NATS's Object Store), its SHA-256
named in the reply beside its path, and a step that does not find the file under its
own run folder with that hash fetches it, checks the hash, and writes it there first.

A store out of reach is not a failure of the step that writes (on one host nothing
needs it): the reply says why in `<key>_problem`, and only a step that then cannot find
the file fails, naming the file, the object and the host (room/objects.py says which
store it asked).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.objects import here, objects_for
from room.errors import BullpenError, StepFailed

if TYPE_CHECKING:
    from agents.roots import Roots
    from agents.runtime.step import StepContext

__all__ = ["arrive", "artifact_bytes", "hand_on"]


async def hand_on(
    ctx: StepContext, step: str, path: Path, data: bytes, roots: Roots, key: str
) -> dict[str, Any]:
    """Write `data` at `path` in the run folder and put it in the store: the reply's
    `<key>` (the path), `<key>_sha256`, or `<key>_problem` when the store is out of reach."""
    roots.write_bytes("runs", path, data, "the run artifact")
    said: dict[str, Any] = {key: str(path)}
    try:
        async with objects_for(ctx.home, ctx.nick, step) as store:
            if store.read_only:  # a replay's private copy: it names what it would hand on
                said[f"{key}_sha256"] = hashlib.sha256(data).hexdigest()
            else:
                said[f"{key}_sha256"] = await store.put(data)
    except BullpenError as exc:  # out of reach, too big, a replay's private copy
        said[f"{key}_problem"] = exc.message[:400]
    return said


def artifact_bytes(value: Any) -> bytes:
    """A run artifact's bytes, as every step writes them."""
    return (json.dumps(value, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


async def arrive(
    ctx: StepContext,
    step: str,
    named: Any,
    sha: Any,
    local: Path,
    roots: Roots,
    problem: Any = None,
) -> Path:
    """The artifact the ask names, as a file under this host's run folder: `named` itself
    when it is there with the named hash (one host, a shared folder), else `local`,
    fetched from the store by its SHA-256 and checked first."""
    if not isinstance(sha, str):  # written by a step that could not store it (or older)
        return Path(str(named))
    for candidate in (Path(str(named)), local):
        try:
            if hashlib.sha256(roots.read_bytes("runs", candidate)).hexdigest() == sha:
                return candidate
        except (OSError, BullpenError):
            continue  # not on this host (or not under this host's run folder)
    try:
        async with objects_for(ctx.home, ctx.nick, step) as store:
            data = await store.get(sha)
    except BullpenError as exc:
        why = f"; the step that wrote it said: {problem}" if problem else ""
        raise StepFailed(
            f"the run artifact {named} is not on host {here()} where @{ctx.nick} runs, and "
            f"could not be fetched from the store: {exc.message}{why}. Run the backpass again "
            "once every step's host reaches the store, or run this step where the one before "
            "it ran (bullpen docs scaling, 'Files travel through the store')"
        ) from None
    roots.write_bytes("runs", local, data, "the run artifact")
    return local

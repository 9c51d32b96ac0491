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

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.objects.travel import find_or_fetch, put_all

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
    (sha,), problem = await put_all(ctx.home, ctx.nick, step, [data])
    if sha is not None:
        said[f"{key}_sha256"] = sha
    if problem is not None:
        said[f"{key}_problem"] = problem
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
    fetched from the store by its SHA-256 and checked first (agents/objects/travel.py)."""
    if not isinstance(sha, str):  # written by a step that could not store it (or older)
        return Path(str(named))
    places = [
        (candidate, lambda candidate=candidate: roots.read_bytes("runs", candidate))
        for candidate in (Path(str(named)), local)
    ]
    found, data = await find_or_fetch(
        ctx.home,
        ctx.nick,
        step,
        sha,
        places,
        what=f"the run artifact {named}",
        advice="Run the backpass again once every step's host reaches the store, or run this "
        "step where the one before it ran (bullpen docs scaling, 'Files travel through the "
        "store')",
        problem=str(problem) if problem else None,
    )
    if found is not None:
        return found
    roots.write_bytes("runs", local, data, "the run artifact")
    return local

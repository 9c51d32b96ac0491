"""Bytes one step hands the next, wherever the next one runs: the one way every pipeline does it.

    names, problem = await put_all(home, nick, step, [data, ...])     # the step that has them
    place, data = await find_or_fetch(home, nick, step, sha, places,  # the step that needs them
                                      what="the run artifact x.json", advice="...")

The step that has the bytes puts them in the room's object store and names their SHA-256
in its reply. The step that needs them looks first where they would be on its own host
(`places`: one host, or a folder both hosts share) and takes the first whose bytes hash
to the name, so nothing is fetched there; otherwise it fetches the object by that name
(the store checks the hash and the bound, `[objects] max_bytes`); otherwise it fails
loud, naming what it needed, the nick, this host, and the store it asked
(room/objects.py). A store out of reach is not the writer's failure (on one host nothing
needs it): `put_all` says why, and only a reader that then cannot find the bytes fails.

Everything fetched is hostile input: it is only ever the bytes of the name asked for,
within the bound the caller gives; where it goes on disk is the caller's to decide, from
its own paths, never from anything fetched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

from agents.objects.store import here, objects_for
from room.errors import BullpenError, StepFailed
from room.objectnames import sha256_of

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["find_or_fetch", "put_all"]

Place = TypeVar("Place")
PARALLEL_PUTS = 8


async def put_all(
    home: Home, nick: str, step: str, blobs: Sequence[bytes]
) -> tuple[list[str | None], str | None]:
    """Each blob put in the store: its SHA-256 (named without storing by a home that stores
    nothing, a replay's private copy), or None; and why one was not stored, if one was not.
    After the first, the puts go side by side (PARALLEL_PUTS at a time): a step handing on
    many small files waits for the slowest, not for the sum."""
    names: list[str | None] = [None] * len(blobs)
    problems: list[str] = []
    try:
        async with objects_for(home, nick, step) as store:
            gate = asyncio.Semaphore(PARALLEL_PUTS)

            async def put(number: int, data: bytes) -> None:
                if store.read_only:  # a replay: it names what it would hand on
                    names[number] = sha256_of(data)
                    return
                async with gate:
                    try:
                        names[number] = await store.put(data)
                    except BullpenError as exc:  # over the bound; the store out of reach
                        problems.append(exc.message)

            numbered = list(enumerate(blobs))
            if numbered:  # the first alone: it opens the store (a NATS connection, the
                # bucket), which puts side by side from the start would each open anew
                await put(*numbered[0])
            await asyncio.gather(*(put(n, data) for n, data in numbered[1:]))
    except BullpenError as exc:  # a token file missing, a store that cannot be opened
        problems.append(exc.message)
    return names, problems[0][:400] if problems else None


async def find_or_fetch(
    home: Home,
    nick: str,
    step: str,
    sha: str,
    places: Iterable[tuple[Place, Callable[[], bytes]]],
    *,
    what: str,
    advice: str,
    problem: str | None = None,
    limit: int | None = None,
) -> tuple[Place | None, bytes]:
    """(the place, its bytes) for the first of `places` whose bytes hash to `sha`; else
    (None, the bytes fetched from the store and checked); else StepFailed naming `what`,
    @nick, this host and the store's answer, then `problem` (what the writer said when it
    could not store them) and `advice` (what to do). `limit` bounds what is fetched."""
    for place, read in places:
        try:
            data = read()
        except (OSError, ValueError, BullpenError):
            continue  # not on this host (or not readable as the caller reads it)
        if sha256_of(data) == sha:
            return place, data
    try:
        async with objects_for(home, nick, step) as store:
            data = await store.get(sha)
    except BullpenError as exc:
        why = f"; the step that wrote it said: {problem}" if problem else ""
        raise StepFailed(
            f"{what} is not on host {here()} where @{nick} runs (step {step}), and could not "
            f"be fetched from the store: {exc.message}{why}. {advice}"
        ) from None
    if limit is not None and len(data) > limit:
        raise StepFailed(
            f"{what} fetched from the store by @{nick} on host {here()} (step {step}) is "
            f"{len(data)} bytes, over the bound of {limit} for it; nothing of it was used"
        )
    return None, data

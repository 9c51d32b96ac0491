"""Memory is a projection of the room: saves addressed to @librarian, applied in seq order.

Every line to the librarian after the index's cursor is looked at once; a
save by a trusted poster whose post the hub verified is checked (the entry's
contract, a declared namespace, a poster allowed to write there and in the
namespace of what it supersedes, a live entry to supersede) and indexed, and
any other save is recorded as refused with the reason. A batch of lines and
the cursor past them are one transaction, and a seq already applied is
skipped, so a librarian killed mid-stream catches up from its cursor without
a duplicate, and a rebuild from seq 0 gives the same index as the live one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.memory.entry import Save, parse_save, seq_of
from agents.memory.errors import Refused, Unavailable
from agents.memory.index import Index
from agents.memory.namespaces import Namespaces, keepers, namespaces, writer_refusal
from room.client import RoomClient, read_file
from room.log import Filter

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["PAGE", "Reader", "Rules", "apply", "catch_up", "file_reader", "hub_reader", "is_save"]

PAGE = 1000
# (after, wait) -> (lines, the seq they cover up to)
Reader = Callable[[int, float], Awaitable[tuple[list[dict[str, Any]], int]]]


@dataclass(frozen=True)
class Rules:
    """What decides whether a save is indexed."""

    librarian: str
    trusted: frozenset[str]
    namespaces: Namespaces
    notify: bool = True  # flag untrusted saves to their posters (never during a rebuild)
    # who may save into every lessons namespace: Rules.of reads the home's (namespaces.keepers);
    # the default is society.toml's default operator nick
    keepers: frozenset[str] = frozenset({"operator"})

    @classmethod
    def of(cls, home: Home, librarian: str, *, notify: bool = True) -> Rules:
        """The home's rules as they are now: the live librarian and a rebuild share them."""
        trusted = frozenset(home.trust.trusted)
        return cls(librarian, trusted, namespaces(home), notify, keepers(home))

    def check_writer(self, index: Index, poster: str, ns: str, save: Save) -> None:
        """Refused when `poster` may not write `ns`, or the namespace of what it supersedes."""
        why = writer_refusal(ns, poster, self.keepers)
        if why is None and save.supersedes is not None:
            old = index.get(seq_of(save.supersedes))
            if old is not None:
                why = writer_refusal(old.ns, poster, self.keepers)
        if why is not None:
            raise Refused(f"not indexed: {why}")


def is_save(line: dict[str, Any], librarian: str) -> bool:
    data = line.get("data")
    return (
        line.get("to") == f"@{librarian}"
        and line.get("type") in ("ask", "chat")
        and isinstance(data, dict)
        and "save" in data
    )


def apply(index: Index, line: dict[str, Any], rules: Rules) -> None:
    """Apply one room line (inside a write transaction); a seq applied before is skipped."""
    if not is_save(line, rules.librarian):
        return
    seq, msg_id, sender = int(line["seq"]), str(line["id"]), str(line["from"])
    if index.seen(seq):
        return
    if sender not in rules.trusted or line.get("verified") is not True:
        why = "is not in TRUST" if sender not in rules.trusted else "was not verified by the hub"
        reason = f"not indexed: the save by {sender} {why}; only trusted, verified saves count"
        index.refuse(seq, msg_id, sender, reason, flag=rules.notify)
        return
    try:
        save = parse_save(line["data"]["save"])
        ns = rules.namespaces.check(save.ns)
        rules.check_writer(index, sender, ns, save)
        index.add(seq, msg_id, sender, str(line.get("ts", "")), save, ns)
    except Refused as exc:
        index.refuse(seq, msg_id, sender, exc.message, flag=False)


def apply_all(index: Index, lines: Iterable[dict[str, Any]], through: int, rules: Rules) -> None:
    with index.writing():
        for line in lines:
            apply(index, line, rules)
        index.set_cursor(through)


async def catch_up(index: Index, read: Reader, rules: Rules, through: int = 0) -> int:
    """Project every line after the index's cursor, at least through seq `through`."""
    after = index.cursor()
    wait = 0.0
    while True:
        lines, last = await read(after, wait)
        if lines or last > after:
            apply_all(index, lines, last, rules)
        full = len(lines) >= PAGE
        after = max(after, last)
        if not full and after >= through:
            return after
        if not full and wait:
            raise Unavailable(f"the room has not acknowledged seq {through} after {wait:g} s")
        wait = 0.0 if full else 5.0


def hub_reader(client: RoomClient, librarian: str) -> Reader:
    async def read(after: int, wait: float) -> tuple[list[dict[str, Any]], int]:
        return await client.read(after, PAGE, to=f"@{librarian}", wait=wait)

    return read


def file_reader(path: Path, librarian: str) -> Reader:
    """The room file read directly (a rebuild on the hub's host needs no hub)."""

    async def read(after: int, wait: float) -> tuple[list[dict[str, Any]], int]:
        if wait:
            await asyncio.sleep(min(wait, 0.2))
        return await asyncio.to_thread(read_file, path, after, PAGE, Filter(to=f"@{librarian}"))

    return read

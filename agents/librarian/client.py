"""Saving through the room: post a save (or an ask) to @librarian and wait for its answer.

The CLI, the MCP `remember` tool and the backpass sync all save this way, so
every entry has the room line it came from, and the librarian's rules (trust,
verified, declared namespaces) are the only ones. A save is checked here
first, so bad input never reaches the room.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from agents.memory.entry import parse_save
from agents.memory.errors import Refused
from agents.memory.namespaces import keepers, memory_config, namespaces, writer_refusal
from room.errors import HubUnavailable

if TYPE_CHECKING:
    from agents.home import Home
    from room.client import RoomClient

__all__ = ["ask_librarian", "checked_save"]

WAIT_S = 30.0


def checked_save(home: Home, save: dict[str, Any], poster: str | None = None) -> dict[str, Any]:
    """The save as it will be posted, or Refused before anything is written; with `poster`,
    also whether that nick may write the namespace (the librarian checks it again, with
    what a `supersedes` names)."""
    entry = parse_save(save)
    body = entry.model_dump(exclude_defaults=True)
    body["ns"] = namespaces(home).check(entry.ns)
    why = None if poster is None else writer_refusal(body["ns"], poster, keepers(home))
    if why is not None:
        raise Refused(why)
    return body


async def ask_librarian(
    home: Home,
    client: RoomClient,
    body: str,
    data: dict[str, Any],
    *,
    thread: str | None = None,
    wait_s: float = WAIT_S,
) -> dict[str, Any]:
    """Post one ask to the librarian as the client's nick; its reply line (a dict)."""
    librarian = memory_config(home).librarian
    built = client.build(f"@{librarian}", body, type="ask", data=data, thread=thread)
    stored = await client.send(built)
    deadline = time.monotonic() + wait_s
    after = int(stored["seq"])
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HubUnavailable(
                f"@{librarian} has not answered {stored['id']} within {wait_s:g} s; is its "
                "lurker running (`bullpen up`)? The save is in the room and will be indexed "
                "when it catches up",
                id=stored["id"],
            )
        lines, last = await client.read(after, 100, sender=librarian, wait=min(left, 5.0))
        after = max(after, last)
        for line in lines:
            if line.get("in_reply_to") == stored["id"]:
                data_out = line.get("data") or {}
                if data_out.get("failed"):
                    raise Refused(str(data_out.get("reason") or line.get("body")))
                return line

"""Ping lurkers from the room: the one way bullpen asks "is @nick listening?".

A lurker answers an ask whose data is `{"ping": true}` itself, before any
handler (agents.runtime.wake.is_ping), so a pong proves the process runs, reads
the room and can post. `bullpen trust check` pings every nick and also judges
each pong's address and verified flag; the commands that start a run ping the
foreman before posting their ask, so nobody waits on a run nothing will take.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from room.errors import BullpenError

if TYPE_CHECKING:
    from room.client import RoomClient


@dataclass
class Pings:
    """What came back: each nick's first reply to its own ping, and pings that were not sent."""

    thread: str
    pongs: dict[str, dict[str, Any]] = field(default_factory=dict)
    unsent: dict[str, BullpenError] = field(default_factory=dict)  # nick -> why not posted
    silent: list[str] = field(default_factory=list)  # asked, no reply before the deadline


async def ping(
    client: RoomClient, nicks: Iterable[str], timeout: float, *, label: str = "ping"
) -> Pings:
    """Ping every nick in one thread and wait up to `timeout` s for all their replies.

    A reply counts for a nick only when it answers that nick's own ask and comes from
    that nick: a line anyone else posts in the thread proves nothing.
    """
    result = Pings(thread=f"{label}-{secrets.token_hex(4)}")
    asked: dict[str, str] = {}  # ask id -> nick
    after = None
    for nick in nicks:
        try:
            stored = await client.say(
                f"@{nick}", "ping", type="ask", data={"ping": True}, thread=result.thread
            )
        except BullpenError as exc:
            result.unsent[nick] = exc
            continue
        asked[str(stored.get("id"))] = nick
        seq = int(stored.get("seq", 0))
        after = seq - 1 if after is None else min(after, seq - 1)
    deadline = time.monotonic() + timeout
    cursor = after or 0
    while asked and time.monotonic() < deadline:
        left = max(0.1, deadline - time.monotonic())
        lines, cursor = await client.read(cursor, 1000, thread=result.thread, wait=min(left, 5.0))
        for line in lines:
            asker = str(line.get("in_reply_to") or "")
            pinged = asked.get(asker)
            if pinged is not None and line.get("from") == pinged:
                del asked[asker]
                result.pongs[pinged] = line
    result.silent = list(asked.values())
    return result

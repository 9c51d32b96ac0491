"""Where a lurker reads the lines addressed to it: one of the room's three followers.

On a JetStream room, its durable consumer (the cursor that survives anything,
docs/scaling.md); on a JSONL room, the room file when this host has it, else the
hub's long-poll. Each starts after the lurker's safe position, so a line being
handled when the follower is started again is neither skipped nor answered twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from room.message import Message
from room.tail import FileFollower, HubFollower, Position

if TYPE_CHECKING:
    from agents.home import Home
    from room.client import RoomClient


def lines_for(
    home: Home,
    nick: str,
    client: RoomClient,
    start: Position,
    use_file: bool,
    *,
    progress: Callable[[], int],
    on_resume: Callable[[int], Awaitable[None]],
    ack_wait_s: float,
) -> AsyncIterator[tuple[Message, Position]]:
    """The lines addressed to `nick` after `start`; `progress` and `on_resume` serve the
    stream's consumer (what is done, and where a consumer behind the cursor resumes)."""
    if home.society.room.engine == "jetstream":
        from room.jetstream.follow import StreamFollower
        from room.jetstream.stream import StreamSettings

        room = home.society.room
        return StreamFollower(
            StreamSettings.from_options(room.engine_options(home.path)),
            nick,
            start,
            progress=progress,
            on_resume=on_resume,
            ack_wait_s=ack_wait_s,
        ).follow()
    if use_file:
        return FileFollower(
            home.room_path, start, safety_s=home.society.lurker.safety_reread_s, to=f"@{nick}"
        ).follow()
    return HubFollower(client, start, to=f"@{nick}").follow()

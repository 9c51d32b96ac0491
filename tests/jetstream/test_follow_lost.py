"""A line the consumer counts as delivered but the lurker never received still reaches it.

Found by tests/hosts' partition test: when a partition moved a consumer's leader, a line
the old leader had handed to a pull request that never reached the lurker counted as
delivered, the new leader held it back for `ack_wait` (minutes), and the lurker's ask sat
unanswered with nothing logged. Here the lost delivery is made on purpose: another client
pulls the line from the lurker's durable consumer and goes away without acknowledging it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats

from room.jetstream.follow import StreamFollower, consumer_name
from room.jetstream.stream import StreamSettings
from room.tail import Position
from tests.jetstream.helpers import post
from tests.support import StreamSociety


async def _steal_one(servers: list[str], stream: str, nick: str) -> int:
    """Pull one line from `nick`'s consumer and leave without acknowledging it: its seq."""
    nc = await nats.connect(servers=servers, connect_timeout=5)
    try:
        psub = await nc.jetstream().pull_subscribe_bind(durable=consumer_name(nick), stream=stream)
        (msg,) = await psub.fetch(1, timeout=10)
        return int(msg.metadata.sequence.stream)
    finally:
        await nc.close()


def test_a_line_delivered_elsewhere_and_never_acknowledged_comes_after_an_idle_fetch(
    tmp_path: Path, nats_server: Any
) -> None:
    society = StreamSociety(tmp_path / "home", nats_server.urls)
    society.start_hub()
    first = post(society, "@worker", "first")
    room = society.home.society.room
    settings = StreamSettings.from_options(room.engine_options(society.home.path))
    yielded: list[int] = []

    async def run() -> None:
        follower = StreamFollower(
            settings,
            "worker",
            Position(0),
            progress=lambda: max(yielded, default=0),
            ack_wait_s=120.0,  # far past the deadline below: only the fix can bring it sooner
            fetch_wait_s=1.0,
        ).follow()
        message, _ = await asyncio.wait_for(anext(follower), 20)
        assert message.id == first["id"]
        yielded.append(message.seq)
        # The follower waits at its yield: no pull request of its own is open, so the
        # thief's is the one the next line goes to (posted before or after it asks).
        stealing = asyncio.create_task(_steal_one(nats_server.urls, society.stream, "worker"))
        second = await asyncio.to_thread(post, society, "@worker", "second")
        assert await stealing == second["seq"]
        message, _ = await asyncio.wait_for(anext(follower), 20)
        assert message.id == second["id"]
        await follower.aclose()

    asyncio.run(run())

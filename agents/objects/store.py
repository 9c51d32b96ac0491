"""The object store of a home's room, for a nick at work on one step.

    async with objects_for(home, "py", "grind") as store:
        sha = await store.put(data)        # SHA-256 of the bytes
        data = await store.get(sha)        # checked against the name, or ObjectError

A JSONL room: the hub keeps the objects (PUT with the nick's proof, GET
with the read token: room/objectstore.py; a nick set `relaxed` uses the
relaxed listener and its token for both, as it does to post). A JetStream
room: NATS's own Object Store, `[objects] bucket` (room/jetstream/objects.py).
Either way the bound is `[objects] max_bytes`, and an error names the object, the step, the
nick and this host. `here()` is the host name every hand-on records, so a
failure on another host can say where the object came from.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from room.objects import Asker, HubObjects, ObjectStore

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["here", "objects_for"]


def here() -> str:
    """This host's name, as hand-ons and errors name it."""
    return socket.gethostname()


def objects_for(home: Home, nick: str, step: str) -> ObjectStore:
    """The store `nick` reaches from this home, for `step` (named in every error); read-only
    for a home whose steps store nothing (a replay's private copy)."""
    store = _store(home, nick, step)
    if not home.stores_objects:
        store.read_only = "a replayed step hands nothing on"
    return store


def _store(home: Home, nick: str, step: str) -> ObjectStore:
    config = home.society
    asker = Asker(nick, step, here())
    if config.room.engine == "jetstream":
        from room.jetstream.objects import StreamObjects
        from room.jetstream.stream import StreamSettings

        settings = StreamSettings.from_options(config.room.engine_options(home.path))
        return StreamObjects(settings, config.objects.bucket, asker, config.objects.max_bytes)
    nick_config = config.nicks.get(nick)
    relaxed_url = config.hub.relaxed_endpoint()
    if nick_config is not None and nick_config.relaxed and relaxed_url:
        # a nick that speaks through the relaxed listener: its token, no proof (as its posts)
        return HubObjects(
            relaxed_url,
            asker,
            config.objects.max_bytes,
            signer=None,
            token=home.relaxed_token(),
        )
    return HubObjects(
        config.hub.strict_url(),
        asker,
        config.objects.max_bytes,
        signer=home.signer_for(nick),
        token=home.read_token(),
    )

"""`bullpen hub`: run the hub, the room's only writer, on this home's listeners.

Apart from the other room commands (agents/cli/room.py) so that the hub's process
loads only what the hub runs: not the hub client (httpx), the tail followers or the
audit's renderers, which it never uses.
"""

from __future__ import annotations

import argparse

from agents.config import parse_address
from agents.home import Home
from room.service import HubSettings
from room.service import main as hub_main


def hub_settings(home: Home) -> HubSettings:
    """The hub's settings, from this home's society.toml and trust table."""
    hub = home.society.hub
    return HubSettings(
        room=home.room_path,
        trust=home.trust,
        strict=parse_address(hub.strict),
        relaxed=parse_address(hub.relaxed) if hub.relaxed else None,
        checkpoint_interval_s=hub.checkpoint_interval_s,
        engine=home.society.room.engine,
        engine_options=home.society.room.engine_options(home.path),
        limits=hub.limits(),
        tlog_origin=hub.tlog_origin,
        witnesses=hub.witness_keys(),
        objects=home.objects_dir,
        objects_max_bytes=home.society.objects.max_bytes,
    )


def cmd_hub(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    return hub_main(hub_settings(home))

"""Tailing readers for the concurrent-writers suite, all in one process.

    python -m tests.reliability.tools.readers ROOM URL --file 4 --hub 4 --until N --out DIR

Runs `--file` room.tail.FileFollower readers on the room file and `--hub`
room.tail.HubFollower readers long-polling the hub, from the start of the
room, until each has seen seq N. Reader `i` writes DIR/<kind>-<i>.txt with one
line per message it was given: `<seq> <sha256 of the message re-serialized>`.
Re-serializing a stored line gives back its exact bytes, so the hash matches
the room's own line only if the reader saw the whole, unaltered line.
Every reader starts at seq 0, so when it starts does not matter.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
from pathlib import Path

from room import strictjson
from room.client import RoomClient
from room.message import Message
from room.tail import FileFollower, HubFollower, Position


def fingerprint(message: Message) -> str:
    return hashlib.sha256(strictjson.dumps(message.to_dict()).encode()).hexdigest()


async def read_until(follower: FileFollower | HubFollower, until: int, out: Path) -> None:
    seen: list[str] = []
    try:
        async for message, _ in follower.follow():
            seen.append(f"{message.seq} {fingerprint(message)}\n")
            if message.seq >= until:
                break
    finally:
        out.write_text("".join(seen))


async def main_async(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    token = Path(args.read_token_file).read_bytes().strip() if args.read_token_file else None
    clients = [RoomClient(args.url, token=token, timeout=30) for _ in range(args.hub)]
    followers: list[tuple[str, FileFollower | HubFollower]] = [
        (f"file-{i}", FileFollower(Path(args.room), Position(0, 0))) for i in range(args.file)
    ]
    followers += [
        (f"hub-{i}", HubFollower(client, Position(0), wait_s=5.0))
        for i, client in enumerate(clients)
    ]
    tasks = [
        asyncio.create_task(read_until(f, args.until, out / f"{name}.txt")) for name, f in followers
    ]
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), args.timeout)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in clients:
            await client.aclose()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("room")
    parser.add_argument("url")
    parser.add_argument("--file", type=int, default=4)
    parser.add_argument("--hub", type=int, default=4)
    parser.add_argument("--until", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--read-token-file", help="the home's read token, for /read")
    args = parser.parse_args()
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())

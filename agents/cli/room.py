"""The room commands a person uses: hub, say, read, tail, audit, keys.

Each takes parsed arguments and returns an exit code; the CLI module only
parses and dispatches. Output that another program may read (stored lines,
JSONL) goes to stdout; everything for people goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import shutil
import sys
from pathlib import Path
from typing import Any

from agents.cli.auditing import audit_with_checkpoints, err, missing_room
from agents.home import Home
from room import render, strictjson
from room.client import read_file
from room.errors import BadPost, CursorAhead, PostRejected, UsageError
from room.log import Filter
from room.message import check_nick, normalize_to
from room.reader import RoomFile
from room.tail import FileFollower, HubFollower, Position, WatchUnavailable
from trust import keys


def _data(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = strictjson.loads(text)
    except strictjson.JsonRejected as exc:
        raise BadPost(f"--data is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadPost('--data must be a JSON object, like \'{"key": "value"}\'')
    return value


async def _say(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    nick = args.as_nick or home.society.operator
    try:
        check_nick(nick, "--as")
        data = _data(args.data)
    except (ValueError, BadPost) as exc:
        err(f"the post was not sent, nothing was written: {getattr(exc, 'message', exc)}")
        return 1
    async with home.client(nick, relaxed=args.relaxed) as client:
        try:
            post = client.build(
                args.to,
                args.body,
                type=args.type,
                data=data,
                in_reply_to=args.reply_to,
                thread=args.thread,
            )
        except BadPost as exc:
            err(f"the post was not sent, nothing was written: {exc.message}")
            return 1
        try:
            stored = await client.send(post)
        except PostRejected as exc:
            err(f"the hub rejected the post: {exc.message}")
            return 1
    print(strictjson.dumps(stored))
    for warning in say_warnings(home, stored):
        err(f"warning: {warning}")
    return 0


def say_warnings(home: Home, stored: dict[str, Any]) -> list[str]:
    """What the poster may not have meant: an addressee no lurker serves, an unverified post."""
    warnings = []
    addressee = str(stored["to"]).removeprefix("@")
    nicks = home.society.nicks
    if addressee not in nicks and addressee != home.society.operator:
        near = difflib.get_close_matches(addressee, list(nicks), n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join('@' + n for n in near)}?)" if near else ""
        warnings.append(
            f"no [nicks.{addressee}] in {home.society_file}: no lurker of this home serves "
            f"@{addressee}, so nothing here will answer{hint}"
        )
    if not stored.get("verified"):
        warnings.append(
            f"{stored['from']} is not privileged in {home.trust_file}: the post was stored with "
            "verified: false, and no lurker acts on it"
        )
    return warnings


def cmd_say(args: argparse.Namespace) -> int:
    return asyncio.run(_say(args))


def _filter(args: argparse.Namespace) -> Filter:
    try:
        return Filter(
            thread=args.thread or None,
            to=normalize_to(args.to) if args.to else None,
            sender=check_nick(args.sender.removeprefix("@"), "--from") if args.sender else None,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _use_file(home: Home, args: argparse.Namespace) -> bool:
    """Read the room file here? Never when the room is a stream: a file left beside it
    (say, after `bullpen import`) is not the room."""
    if home.society.room.engine != "jsonl":
        return False
    return not args.hub and home.room_path.exists()


async def _read(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    flt = _filter(args)
    after = args.after
    if _use_file(home, args):
        if args.last is not None:
            with RoomFile(home.room_path) as room:
                after = max(0, room.last_seq() - args.last)
        lines, _ = read_file(home.room_path, after, args.limit, flt)
        for line in lines:
            print(strictjson.dumps(line))
        return 0
    async with home.client(relaxed=args.relaxed) as client:
        if args.last is not None:
            health = await client.health()
            after = max(0, int(health["seq"]) - args.last)
        left = args.limit
        while left is None or left > 0:  # page through the hub's 1,000-line answers
            page = 1000 if left is None else min(left, 1000)
            lines, last = await client.read(
                after, page, thread=flt.thread, to=flt.to, sender=flt.sender
            )
            for line in lines:
                print(strictjson.dumps(line))
            if left is not None:
                left -= len(lines)
            if last <= after:
                break
            after = last
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    return asyncio.run(_read(args))


async def _tail(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    flt = _filter(args)
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    if _use_file(home, args):
        with RoomFile(home.room_path) as room:
            head = room.last_seq()
    else:
        async with home.client(relaxed=args.relaxed) as client:
            head = int((await client.health())["seq"])
    if args.after is not None and args.after > head:
        raise UsageError(
            f"the room ends at seq {head}; --after must be at most that (tail then shows each "
            "line as it arrives)"
        )
    start = Position(args.after if args.after is not None else max(0, head - args.last))

    def show(line: dict[str, Any]) -> None:
        if not flt.matches(
            line.get("from", ""),
            line.get("to", ""),
            line.get("thread"),
            line.get("verified") is True,
        ):
            return
        print(strictjson.dumps(line) if args.json else render.human(line, width))
        sys.stdout.flush()

    if _use_file(home, args):
        follower = FileFollower(home.room_path, start, safety_s=home.society.lurker.safety_reread_s)
        try:
            async for message, _ in follower.follow():
                show(message.to_dict())
            return 0
        except WatchUnavailable as exc:
            err(f"{exc}; following the hub instead")
    async with home.client(relaxed=args.relaxed) as client:
        async for message, _ in HubFollower(client, start).follow():
            show(message.to_dict())
    return 0


def cmd_tail(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_tail(args))
    except KeyboardInterrupt:
        return 0
    except CursorAhead as exc:
        err(exc.message)
        return 1


def cmd_audit(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    if args.path is None and home.society_file.exists() and home.society.room.engine == "jetstream":
        from agents.cli.stream import cmd_audit_stream  # nats is imported only for a stream

        return cmd_audit_stream(args)
    path = Path(args.path) if args.path else None
    table = None
    if home.trust_file.exists():
        table = home.trust
    if path is None:
        home.require()
        path = home.room_path
        if not path.exists():  # a home whose hub has never started: nothing to check yet
            failed = missing_room(path)
            if failed is not None:
                return failed
            print(
                f"the room {path} was never started: there is nothing to audit yet. The hub "
                "creates it when it first starts (`bullpen up`, or `bullpen hub`); audit it then",
                file=sys.stderr,
            )
            print("not started: no room yet")
            return 0
    if not path.exists():
        err(f"there is no room at {path}; pass the path of a room.jsonl")
        return 1
    if not path.is_file():
        err(f"cannot audit {path}: it is a folder, not a room file; pass the path of a room.jsonl")
        return 1
    public_keys = table.public_keys if table is not None and not args.no_signatures else None
    return audit_with_checkpoints(
        path, args.checkpoint, table, public_keys, beside=path if args.path is None else None
    )


def cmd_keys(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    try:
        check_nick(args.nick, "NICK")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    path = home.trust.key_file(args.nick)
    if args.action == "new":
        key = keys.generate_private_key(path)
        print(
            f"wrote {path} (0600). Add this line under [privileged] in {home.trust_file}:",
            file=sys.stderr,
        )
    else:
        key = keys.load_private_key(path)
    print(f'{args.nick} = "{keys.public_text(key)}"')
    return 0

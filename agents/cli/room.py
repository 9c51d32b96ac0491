"""The room commands a person uses: hub, say, read, tail, audit, keys.

Each takes parsed arguments and returns an exit code; the CLI module only
parses and dispatches. Output that another program may read (stored lines,
JSONL) goes to stdout; everything for people goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import mmap
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from agents.cli.auditing import audit_with_checkpoints, err, missing_room
from agents.home import Home
from agents.wording import did_you_mean
from room import render, strictjson
from room.client import read_file
from room.errors import BadPost, CursorAhead, PostRejected, UsageError
from room.log import Filter
from room.message import check_nick, normalize_to
from room.reader import RoomFile
from room.stopsignals import INTERRUPTED
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
    refusal = say_refusal(home, args)
    if refusal is not None:
        err(f"the post was not sent, nothing was written: {refusal}")
        return 2
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


def say_refusal(home: Home, args: argparse.Namespace) -> str | None:
    """A post that cannot be what its poster meant: an ask with nothing to do, a reply to a
    message that is in no line of the room (checked where this host has the room file)."""
    if args.type == "ask" and not str(args.body).strip():
        return "an ask with an empty body asks nothing; say what to do"
    if args.reply_to and _use_file(home, argparse.Namespace(hub=False)):
        needle = f'"id":"{args.reply_to}"'.encode()
        if not _in_room(home, needle):
            return (
                f"--reply-to {args.reply_to}: no line of the room has that id; give the "
                "id of the message answered (`bullpen read` shows each line's id)"
            )
    return None


def _in_room(home: Home, needle: bytes) -> bool:
    """Whether the room file holds `needle`; mapped, not read: a room may be large."""
    with open(home.room_path, "rb") as room:
        if os.fstat(room.fileno()).st_size == 0:
            return False
        with mmap.mmap(room.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return mapped.find(needle) >= 0


def known_threads(home: Home) -> list[str]:
    """Every thread of the room, from its file (none when this host has no room file)."""
    if not _use_file(home, argparse.Namespace(hub=False)):
        return []
    lines, _ = read_file(home.room_path, 0, None, Filter())
    return sorted({str(line["thread"]) for line in lines if line.get("thread")})


def nick_warning(home: Home, nick: str) -> str | None:
    """Why following `@nick` will show nothing: no lurker serves it and no one is it."""
    trust = home.trust
    known = {*home.society.nicks, home.society.operator, *trust.trusted, *trust.privileged}
    if nick in known:
        return None
    return (
        f"@{nick} is no nick of this society (no [nicks.{nick}], not the operator, not in "
        f"trust.toml): nothing may ever be addressed to it{did_you_mean(nick, known, '@')}"
    )


def say_warnings(home: Home, stored: dict[str, Any]) -> list[str]:
    """What the poster may not have meant: an addressee no lurker serves, an unverified post."""
    warnings = []
    addressee = str(stored["to"]).removeprefix("@")
    nicks = home.society.nicks
    if addressee not in nicks and addressee != home.society.operator:
        hint = did_you_mean(addressee, nicks, "@")
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
        if not lines and flt.thread:
            threads = known_threads(home)
            if flt.thread not in threads:
                err(
                    f"warning: no line of the room has thread {flt.thread}"
                    f"{did_you_mean(flt.thread, threads)}; `bullpen runs` lists the runs"
                )
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
    if flt.to:
        warning = nick_warning(home, flt.to.removeprefix("@"))
        if warning:
            err(f"warning: {warning}")
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
        return INTERRUPTED
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
        path,
        args.checkpoint,
        table,
        public_keys,
        beside=path if args.path is None else None,
        as_json=args.json,
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

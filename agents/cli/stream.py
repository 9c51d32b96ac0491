"""The room commands for a room on JetStream: export, import, and audit from the stream.

    bullpen export FILE    the stream, line by line, into a room.jsonl (exact bytes)
    bullpen import FILE    a room.jsonl into the home's (empty) stream, audited before any of it
    bullpen audit          with [room] engine = "jetstream": the stream, checked like a file

An exported file is a room: `bullpen audit FILE` checks it exactly as it
checks a JSONL room, and a JSONL hub can serve it. Import audits the whole
file first (every line one the hub could have written, seqs and chain) and
publishes nothing from a file that fails; it continues an interrupted import
when the stream holds a prefix of the same room (its last line matches the
file's line at that seq).

NATS's own errors become ConfigError (exit 78) or LogError (exit 1) here,
never a traceback (room/jetstream/stream.py, nats_failure).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
from pathlib import Path

import nats.errors
from nats.aio.client import Client as NATS

from agents.cli.auditing import audit_with_checkpoints
from agents.home import Home
from room.chain import GENESIS, line_hash
from room.errors import ConfigError, LogError, RoomCorrupt, UsageError
from room.fileio import fsync_dir
from room.jetstream.stream import (
    Publisher,
    StreamSettings,
    connect,
    ensure_stream,
    nats_failure,
    scan,
)
from room.message import parse_line
from room.reader import RoomFile
from trust.audit import audit_file

IMPORT_BATCH = 256


def stream_settings(home: Home) -> StreamSettings:
    """The home's stream, or a ConfigError that says how to point the home at one."""
    room = home.society.room
    if room.engine != "jetstream":
        raise ConfigError(
            f'{home.society_file}: [room] engine is "{room.engine}"; set engine = "jetstream" '
            "(with servers, stream and replicas) to export, import or audit a stream "
            "(`bullpen docs scaling`)"
        )
    return StreamSettings.from_options(room.engine_options(home.path))


async def export_stream(
    settings: StreamSettings, dest: Path, client: str = "bullpen-export"
) -> int:
    """Write every line of the stream to `dest` (write, fsync, rename); return the count."""
    nc = await connect(settings, client)
    tmp = dest.with_name(dest.name + ".export-tmp")
    try:
        js = nc.jetstream()
        info, _ = await ensure_stream(js, settings, create=False)
        last = info.state.last_seq
        count = 0
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            chunk: list[bytes] = []
            async for seq, raw in scan(js, settings, 1, last):
                if seq != count + 1:
                    raise RoomCorrupt(
                        f"the stream {settings.stream!r} has no message at seq {count + 1} (the "
                        f"next one is {seq}): lines were removed from it"
                    )
                count = seq
                chunk.append(raw + b"\n")
                if len(chunk) >= 1024:
                    os.write(fd, b"".join(chunk))
                    chunk = []
            os.write(fd, b"".join(chunk))
            if count != last:
                raise RoomCorrupt(
                    f"the stream {settings.stream!r} ended at seq {count}, but it said its last "
                    f"seq is {last}"
                )
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, dest)
        fsync_dir(dest.parent)
        return count
    except (nats.errors.Error, TimeoutError) as exc:
        raise nats_failure(exc, settings, f"reading the stream {settings.stream!r}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        await nc.close()


def check_import(source: Path) -> int:
    """Audit the whole file before anything is published; its line count, or RoomCorrupt.

    The same checks as `bullpen audit FILE` (every line one the hub could
    have written, seq 1, 2, 3 …, the chain), without signatures: those are
    the audit's to judge against trust.toml, not the import's.
    """
    with RoomFile(source) as room:
        size = room.size()
        if size and room.pread(1, size - 1) != b"\n":
            raise RoomCorrupt(
                f"{source} ends with a torn line; nothing was imported. Start a JSONL hub on it "
                f"once (it moves the tail aside) or check it with `bullpen audit {source}`"
            )
    result = audit_file(source)
    if not result.ok:
        raise RoomCorrupt(
            f"{source} is not a whole, unbroken room ({result.summary()}); nothing was "
            f"imported. Check it with `bullpen audit {source}`"
        )
    return result.lines


async def import_room(settings: StreamSettings, source: Path) -> tuple[int, int]:
    """Publish `source`'s lines after whatever prefix of it the stream holds; (new, already)."""
    check_import(source)
    nc = await connect(settings, "bullpen-import")
    try:
        return await _import(nc, settings, source)
    except (nats.errors.Error, TimeoutError) as exc:
        raise nats_failure(
            exc, settings, f"importing into the stream {settings.stream!r}"
        ) from None
    finally:
        await nc.close()


async def _import(nc: NATS, settings: StreamSettings, source: Path) -> tuple[int, int]:
    """Publish the audited file's lines after the prefix the stream already holds."""
    js = nc.jetstream(timeout=10.0)
    info, _ = await ensure_stream(js, settings, create=True)
    already = info.state.last_seq
    stream_last = b""
    if already:
        stream_last = (await js.get_msg(settings.stream, already)).data or b""
    publisher = Publisher(nc)
    await publisher.start()
    prev, expected = GENESIS, 1
    batch: list[tuple[str, bytes, dict[str, str]]] = []
    before_id: str | None = None
    imported = 0
    with RoomFile(source) as room:
        for _, raw in room.lines_from(0):
            problem = None
            try:
                message = parse_line(raw)
            except ValueError as exc:
                problem = f"the line after seq {expected - 1} does not parse ({exc})"
            else:
                if message.seq != expected or message.prev != prev:
                    problem = (
                        f"seq {message.seq} does not follow seq {expected - 1} (its seq or "
                        "prev is wrong)"
                    )
            if problem is not None:  # it passed the audit: the file changed since
                raise RoomCorrupt(
                    f"{source} changed while it was being imported: {problem}; {imported} "
                    "lines were imported before it. Stop whatever writes to it, then run "
                    "`bullpen import` again: it continues after them"
                )
            if message.seq == already and raw != stream_last:
                raise LogError(
                    f"the stream {settings.stream!r} already holds {already} lines, and its "
                    f"last line differs from line {already} of {source}: it holds another "
                    "room. Import into an empty stream (another [room] stream name)"
                )
            prev, expected = line_hash(raw), expected + 1
            if message.seq <= already:
                continue
            headers = {
                "Nats-Msg-Id": message.id,
                "Nats-Expected-Last-Sequence": str(message.seq - 1),
            }
            if batch and before_id is not None:
                headers["Nats-Expected-Last-Msg-Id"] = before_id
            before_id = message.id
            batch.append((settings.subject(message.to, message.type), raw, headers))
            if len(batch) >= IMPORT_BATCH:
                imported += await _publish_batch(publisher, batch, expected - 1, settings)
                batch = []
        if expected - 1 < already:
            raise LogError(
                f"the stream {settings.stream!r} holds {already} lines, more than {source} "
                f"({expected - 1}); it holds another room"
            )
        if batch:
            imported += await _publish_batch(publisher, batch, expected - 1, settings)
    return imported, already


async def _publish_batch(
    publisher: Publisher,
    batch: list[tuple[str, bytes, dict[str, str]]],
    last_seq: int,
    settings: StreamSettings,
) -> int:
    futures = [await publisher.publish(subject, raw, headers) for subject, raw, headers in batch]
    try:
        answers = await asyncio.wait_for(asyncio.gather(*futures), 30.0)
    except TimeoutError:
        raise LogError(
            f"the stream {settings.stream!r} did not acknowledge the import in time; run "
            "`bullpen import` again: it continues after what was stored"
        ) from None
    first = last_seq - len(batch) + 1
    for offset, answer in enumerate(answers):
        error = answer.get("error")
        if error:
            raise LogError(
                f"the stream refused seq {first + offset} ({error.get('description')}); was a hub "
                "writing to it? Stop every hub, then run `bullpen import` again"
            )
    return len(batch)


def cmd_export(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    dest = Path(args.file)
    if dest.exists():
        raise UsageError(f"{dest} exists; export into a new file (nothing was overwritten)")
    count = asyncio.run(export_stream(stream_settings(home), dest))
    print(f"exported {count} lines to {dest}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    source = Path(args.file)
    if not source.is_file():
        raise ConfigError(f"there is no room file at {source}")
    settings = stream_settings(home)
    imported, already = asyncio.run(import_room(settings, source))
    if already:
        print(f"the stream already held seq 1..{already} of this room", file=sys.stderr)
    print(
        f"imported {imported} lines into the stream {settings.stream}; check it with `bullpen audit`",
        file=sys.stderr,
    )
    if home.room_path.exists():
        print(
            f"now move {home.room_path} aside (e.g. to {home.room_path.name}.imported): lurkers "
            "on this host would take a room file there for the room",
            file=sys.stderr,
        )
    return 0


def cmd_audit_stream(args: argparse.Namespace) -> int:
    """`bullpen audit` for a stream: export to a private temporary file, audit that."""
    home = Home.at(args.home)
    home.require()
    settings = stream_settings(home)
    table = home.trust if home.trust_file.exists() else None
    public_keys = table.public_keys if table is not None and not args.no_signatures else None
    with tempfile.TemporaryDirectory(prefix="bullpen-audit-") as tmp:
        copy = Path(tmp) / "room.jsonl"
        asyncio.run(export_stream(settings, copy, client="bullpen-audit"))
        print(f"stream {settings.stream} on {', '.join(settings.servers)}", file=sys.stderr)
        return audit_with_checkpoints(
            copy, args.checkpoint, table, public_keys, home.room_path, as_json=args.json
        )

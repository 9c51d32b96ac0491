"""Recovery at start-up: cut off a torn tail, and refuse anything else.

What a crash can damage. The log writes at most MAX_BATCH_BYTES at a time
and fsyncs each write before it starts the next, so after a power failure
only the bytes of the last write can be missing or damaged — a prefix, or
512-byte sectors in any order, zeroed or garbled — and none of them was
acknowledged (an acknowledgement waits for that fsync). Everything before
that write is on disk as written.

What the hub knows at start, from outside the bytes it is judging:
- its signed checkpoint (seq and hash): that line was acknowledged, so fsynced;
- its durable mark (room/durable.py): seq, offset and hash of the last line it
  fsynced; it may lag after a power loss, never lead;
- the bound above: damage from a crash lies within one write of the end.

The recoverable case, a torn tail: the first damaged line starts at or after
the floor (the end of the mark's line; the checkpoint's seq) and it and
everything after it fit in one write. Those bytes could not have been
acknowledged: they are moved to a side file and reported, and what is kept
is synced before it is served.

Anything else is a fail-stop that moves nothing: damage below the floor, a
damaged line followed by more good lines than one write can hold (a hole in
the middle), a line that parses but does not chain (an edit), a room shorter
than its mark or checkpoint, or a different line at their seq. The message
names the seq and byte offset and the ways out: `bullpen audit`, restoring a
backup, or the exact command that moves the damaged tail aside by hand.
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

import structlog

from room.chain import GENESIS, line_hash
from room.durable import Mark, mark_path
from room.errors import RoomCorrupt
from room.fileio import FileIO, fsync_dir
from room.log import Head
from room.message import Message, parse_line
from room.reader import RoomFile
from room.tree import tree_dir

log = structlog.get_logger("room.recovery")

# One write of a batch holds at most this many bytes (a single line is always
# smaller: a post's body is at most 64 KiB, 384 KiB escaped, and its data 256 KiB).
MAX_BATCH_BYTES = 1024 * 1024
# Recovery checks every line this far back from the end: more than one write, so
# damage just below what a crash can reach is found and refused, not ignored.
TAIL_CHECK_BYTES = 2 * MAX_BATCH_BYTES


@dataclass(frozen=True)
class Checkpointed:
    """The hub's signed checkpoint, already verified: that line was acknowledged."""

    seq: int
    hash: str
    path: Path  # the checkpoint file, named in what to do


def move_aside(room: Path, fd: int, keep: int, size: int, why: str, io: FileIO) -> Path:
    """Copy bytes [keep, size) to a new side file, then cut the room back to `keep`."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    n = 0
    while True:
        side = room.with_name(f"{room.name}.torn-{stamp}" + (f"-{n}" if n else ""))
        try:
            side_fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            break
        except FileExistsError:
            n += 1
    try:
        pos = keep
        while pos < size:
            chunk = os.pread(fd, min(1 << 20, size - pos), pos)
            os.write(side_fd, chunk)
            pos += len(chunk)
        os.fsync(side_fd)
    finally:
        os.close(side_fd)
    fsync_dir(room.parent)
    io.truncate(fd, keep)
    io.fsync(fd)
    log.warning("room tail moved aside", side_file=str(side), bytes=size - keep, reason=why)
    return side


def _message(line: bytes) -> Message | None:
    """The line as a room message, or None when it is not one (torn, garbled, not JSON)."""
    try:
        message = parse_line(line)
    except ValueError:
        return None
    return message if message.seq >= 1 and len(message.prev) == 64 else None


class _Refusal:
    """Builds the fail-stop: what is wrong, where, and the ways out."""

    def __init__(self, room: Path, checkpoint: Checkpointed | None) -> None:
        self.room = room
        self.checkpoint = checkpoint

    def _set_aside(self) -> str:
        """Moving the hub's own records aside: they describe the history being given up."""
        names = [mark_path(self.room)]
        if self.checkpoint is not None:
            names.append(self.checkpoint.path)
        if tree_dir(self.room).exists():  # the tree and its signed note (rebuilt at start)
            names.append(tree_dir(self.room))
        return " && ".join(
            f"mv {shlex.quote(str(p))} {shlex.quote(str(p) + '.old')}" for p in names
        )

    def damaged(
        self, why: str, seq: int | None, offset: int, size: int, following: int
    ) -> RoomCorrupt:
        room = shlex.quote(str(self.room))
        named = f"seq {seq}" if seq is not None else f"byte {offset}"
        side = shlex.quote(str(self.room.with_name(f"{self.room.name}.damaged-from-{offset}")))
        after = f", followed by {following} whole lines that parse" if following else ""
        return RoomCorrupt(
            f"the room {self.room} is damaged at {named} (byte offset {offset}, "
            f"{size - offset} bytes before its end{after}): {why}. That is not a torn write a "
            "crash can leave, so the hub moved nothing and will not start. Run "
            f"`bullpen audit {room}` to see the damage, and restore the room from a backup; "
            f"or, to give up {named} and every line after it, move them aside by hand with "
            f"the hub stopped: `tail -c +{offset + 1} {room} > {side} && truncate -s {offset} "
            f"{room} && {self._set_aside()}`, then start the hub",
            seq=seq,
            offset=offset,
        )

    def contradicted(self, why: str, seq: int) -> RoomCorrupt:
        return RoomCorrupt(
            f"the room {self.room} {why}: acknowledged lines were lost or changed (a damaged "
            "disk, a cut, a room replaced). The hub moved nothing and will not start. Run "
            f"`bullpen audit {shlex.quote(str(self.room))}` and restore the room from a backup; "
            "if the room was deliberately cut or started over, set the hub's records of the "
            f"old one aside with `{self._set_aside()}`, then start the hub",
            seq=seq,
        )


def _check_mark(reader: RoomFile, size: int, mark: Mark, refuse: _Refusal) -> None:
    """The mark's line must be in the room where the mark says, as it was fsynced."""
    if mark.offset > size:
        raise refuse.contradicted(
            f"is {size} bytes, shorter than the {mark.offset} bytes (up to seq {mark.seq}) "
            f"its durable mark {mark_path(reader.path).name} records as fsynced",
            mark.seq,
        )
    if mark.offset == 0:
        return
    found = reader.last_line(mark.offset) if reader.pread(1, mark.offset - 1) == b"\n" else None
    if found is None or _message(found[1]) is None or line_hash(found[1]) != mark.hash:
        raise refuse.contradicted(
            f"does not hold, at byte {mark.offset}, the line seq {mark.seq} its durable mark "
            f"{mark_path(reader.path).name} records as fsynced",
            mark.seq,
        )


def _check_checkpoint(
    reader: RoomFile, checkpoint: Checkpointed, below: Head, end: int, refuse: _Refusal
) -> None:
    """A checkpoint at or below the scanned tail: find its line and compare hashes."""
    if checkpoint.seq == below.seq:
        same = below.hash == checkpoint.hash
    else:
        start = reader.offset_after(checkpoint.seq - 1, end)
        _, raw = next(iter(reader.lines_from(start, end)), (start, b""))
        message = _message(raw)
        same = message is not None and message.seq == checkpoint.seq
        same = same and line_hash(raw) == checkpoint.hash
    if not same:
        raise refuse.contradicted(
            f"holds, at seq {checkpoint.seq}, a line that is not the one the hub's signed "
            f"checkpoint {checkpoint.path.name} recorded",
            checkpoint.seq,
        )


def recover(
    room: Path,
    fd: int,
    io: FileIO | None = None,
    *,
    checkpoint: Checkpointed | None = None,
    mark: Mark | None = None,
) -> tuple[Head, int, list[str]]:
    """Find where the valid room ends; move a torn tail aside or refuse. Returns (head, size, notes)."""
    io = io or FileIO()
    size = os.fstat(fd).st_size
    refuse = _Refusal(room, checkpoint)
    reader = RoomFile(room)
    try:
        if mark is not None:
            _check_mark(reader, size, mark, refuse)
        floor = 0 if mark is None else mark.offset
        head = Head(0, GENESIS)
        start = (
            reader._last_newline_before(size - TAIL_CHECK_BYTES) if size > TAIL_CHECK_BYTES else 0
        )
        if start > 0:
            before = reader.last_line(start)
            assert before is not None  # start follows a newline
            anchor = _message(before[1])
            if anchor is None:
                following = _whole_lines_after(reader, before[0], size)
                unparsed = "the line there does not parse, further back than the last write reaches"
                raise refuse.damaged(
                    unparsed, _seq_at(reader, before[0]), before[0], size, following
                )
            head = Head(anchor.seq, line_hash(before[1]))
        if checkpoint is not None and checkpoint.seq <= head.seq:
            _check_checkpoint(reader, checkpoint, head, start, refuse)
        good, bad = start, None
        for offset, raw in reader.lines_from(start, size):
            message = _message(raw)
            if message is None:
                bad = offset
                break
            if head.seq == 0 and (message.seq != 1 or message.prev != GENESIS):
                raise RoomCorrupt(
                    f"{room} starts at seq {message.seq}, not 1; run `bullpen audit {room}`"
                )
            if message.seq != head.seq + 1 or message.prev != head.hash:
                raise refuse.damaged(
                    f"seq {message.seq} parses but does not chain to the line before it, so the "
                    "file was edited",
                    message.seq,
                    offset,
                    size,
                    0,
                )
            head = Head(message.seq, line_hash(raw))
            if checkpoint is not None and message.seq == checkpoint.seq:
                _check_checkpoint(reader, checkpoint, head, size, refuse)
            good = offset + len(raw) + 1
        notes: list[str] = []
        if good < size:
            following = 0 if bad is None else _whole_lines_after(reader, bad, size)
            why: str | None = None
            if good < floor:
                why = (
                    f"it lies below the durable mark (seq {mark.seq if mark else 0}, byte "
                    f"{floor}): those lines were fsynced, so a crash cannot have torn them"
                )
            elif checkpoint is not None and head.seq < checkpoint.seq:
                why = (
                    f"it lies below the hub's signed checkpoint at seq {checkpoint.seq}: those "
                    "lines were acknowledged"
                )
            elif size - good > MAX_BATCH_BYTES:
                why = (
                    f"the damaged part is {size - good} bytes, more than the {MAX_BATCH_BYTES} "
                    "bytes the hub writes between two fsyncs, so lines fsynced before the last write "
                    "are in it"
                )
            if why is not None:
                raise refuse.damaged(why, head.seq + 1, good, size, following)
            side = move_aside(room, fd, good, size, "torn or unparseable tail", io)
            notes.append(
                f"moved {size - good} bytes of torn or unparseable tail from {room.name} "
                f"to {side.name}"
            )
        else:
            if checkpoint is not None and head.seq < checkpoint.seq:
                raise refuse.contradicted(
                    f"ends at seq {head.seq}, but the hub's signed checkpoint "
                    f"{checkpoint.path.name} recorded seq {checkpoint.seq}",
                    checkpoint.seq,
                )
            # A hub that died may have left lines it wrote but never synced: they are
            # the head now, so make them durable before anyone is served them.
            io.fsync(fd)
        return head, good, notes
    finally:
        reader.close()


def _seq_at(reader: RoomFile, offset: int) -> int | None:
    """The seq a damaged line at `offset` would have had: one past the line before it."""
    if offset == 0:
        return 1
    found = reader.last_line(offset)
    message = None if found is None else _message(found[1])
    return None if message is None else message.seq + 1


def _whole_lines_after(reader: RoomFile, bad: int, size: int) -> int:
    """How many lines after a damaged one still parse: more than none means a hole."""
    lines = iter(reader.lines_from(bad, size))
    next(lines, None)  # the damaged line itself
    return sum(1 for _, raw in lines if _message(raw) is not None)

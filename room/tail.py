"""Following the room as it grows: a local file woken by inotify, or the hub by long-poll.

A file follower reads new whole lines from its byte offset whenever the
room's folder reports a change (room.watch), plus a slow safety re-read in
case an event is ever missed. Idle, it costs nothing: no polling loop. When
no watcher can be had, the caller is told and can follow the hub instead.

It delivers a line only once the hub's durable mark (room/durable.py) covers
it: a line is in the file from its write, but a power loss before its fsync
would take it back, after a lurker had already acted on it. The mark is
rewritten right after each fsync, and its change wakes the follower too.

Both followers yield (Message, Position); a Position is what a reader saves
to resume exactly where it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from room import strictjson
from room.durable import MarkReader
from room.errors import CursorAhead, HubUnavailable
from room.reader import RoomFile, seq_of
from room.watch import WatchUnavailable, open_watch

if TYPE_CHECKING:
    from room.client import RoomClient
    from room.message import Message

__all__ = ["FileFollower", "HubFollower", "Position", "RawFollower", "WatchUnavailable"]

T = TypeVar("T")


def _structlog(name: str) -> Any:
    """The process's structlog logger, imported when a follower is made: a lone lurker's idle
    loop (agents/runtime/lean.py) follows the room on the stdlib and passes its own log."""
    import structlog

    return structlog.get_logger(name)


@dataclass(frozen=True)
class Position:
    seq: int
    offset: int = -1  # byte offset just past `seq`'s line; -1 when unknown (hub reads)


class _FileTail(Generic[T]):
    """Follow a room file's durable lines after a position; `_accept` turns a line that
    passed the `to` needle into what the follower yields (None: skip it)."""

    def __init__(
        self,
        path: Path,
        start: Position,
        *,
        safety_s: float = 30.0,
        watcher: str = "auto",
        to: str | None = None,
        log: Any = None,
    ) -> None:
        self.log = log if log is not None else _structlog("room.tail")
        self.path = path
        self._pos = start
        # Lines not addressed to `to` are skipped on their bytes, unparsed: with twenty
        # lurkers tailing one room, parsing every line in every lurker is the main cost.
        self._needle = b'"to":' + strictjson.dumps(to).encode() if to else None
        self._safety_s = safety_s
        self._watcher = watcher
        self._stop = asyncio.Event()
        self._room: RoomFile | None = None
        self._mark = MarkReader(path)

    @property
    def position(self) -> Position:
        return self._pos

    def stop(self) -> None:
        self._stop.set()

    def _resolve_offset(self, room: RoomFile) -> int:
        size = room.size()
        offset = self._pos.offset
        if offset < 0 or offset > size or (offset and room.pread(1, offset - 1) != b"\n"):
            offset = room.offset_after(self._pos.seq, size)
        last = room.last_seq(size)
        if self._pos.seq > last:
            raise CursorAhead(
                f"the room {self.path} ends at seq {last}, but this reader already read up to "
                f"seq {self._pos.seq}: the room was truncated or replaced. Restore the room "
                "from its backup, or reset the reader's cursor if the room was deliberately "
                "started over",
                room_seq=last,
                cursor_seq=self._pos.seq,
            )
        return offset

    def _accept(self, raw: bytes, seq: int, start: int) -> tuple[T, int] | None:
        """(what to yield, its seq), or None to skip the line (keeping the seq read so far)."""
        raise NotImplementedError

    def _drain(self) -> list[tuple[T, Position]]:
        """Read every whole line past the offset; reopen when the file was replaced."""
        if self._room is None:
            self._room = RoomFile(self.path)
        room = self._room
        if room.replaced():
            self.log.warning("room file was replaced; reopening", path=str(self.path))
            room.reopen()
            self._pos = Position(self._pos.seq, -1)
        size = room.size()
        if self._pos.offset > size:
            raise CursorAhead(
                f"the room {self.path} is {size} bytes, shorter than this reader's offset "
                f"{self._pos.offset}: it was truncated. Restore it from a backup; the "
                "reader will not reset its cursor by itself",
                size=size,
                offset=self._pos.offset,
            )
        offset = self._resolve_offset(room)
        found = []
        for start, raw in room.lines_from(offset, self._mark.limit(size)):
            end = start + len(raw) + 1
            seq = seq_of(raw)
            if seq <= self._pos.seq:
                self._pos = Position(self._pos.seq, end)
                continue
            if self._needle is not None and self._needle not in raw:
                self._pos = Position(seq, end)
                continue
            accepted = self._accept(raw, seq, start)
            if accepted is None:
                self._pos = Position(self._pos.seq, end)
                continue
            item, item_seq = accepted
            self._pos = Position(item_seq, end)
            found.append((item, self._pos))
        if not found:
            self._pos = Position(self._pos.seq, max(self._pos.offset, offset))
        return found

    async def follow(self) -> AsyncIterator[tuple[T, Position]]:
        """Yield new lines as they arrive; raise WatchUnavailable when no watcher can be had."""
        folder = self.path.parent
        while not folder.exists():
            self.log.warning("room folder missing; waiting for it", folder=str(folder))
            if await self._wait_stop(2.0):
                return
        watch = open_watch(self.path, self._watcher)  # set up before the first read: no gap
        try:
            while not self._stop.is_set():
                for item in self._drain_safely():
                    yield item
                await watch.changed(self._safety_s)
        finally:
            watch.close()
            self._mark.close()
            if self._room is not None:
                self._room.close()
                self._room = None

    def _drain_safely(self) -> list[tuple[T, Position]]:
        try:
            return self._drain()
        except FileNotFoundError:
            if self._room is not None:
                self._room.close()
                self._room = None
            self.log.warning("room file missing; waiting for it to come back", path=str(self.path))
            return []

    async def _wait_stop(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            return False
        return True


class FileFollower(_FileTail["Message"]):
    """Yield every message appended to a room file after a position."""

    def _accept(self, raw: bytes, seq: int, start: int) -> tuple[Message, int] | None:
        from room.message import parse_line  # loaded once; not by the lean idle loop

        try:
            message = parse_line(raw)
        except ValueError as exc:
            self.log.error(
                "skipping a line that is not a room message",
                seq=seq,
                offset=start,
                error=str(exc),
            )
            return None
        return message, message.seq


class RawFollower(_FileTail[bytes]):
    """Yield the raw bytes of every line addressed to `to` after a position, unparsed: the
    idle loop of a lone lurker (agents/runtime/lean.py) decides on them without pydantic."""

    def _accept(self, raw: bytes, seq: int, start: int) -> tuple[bytes, int] | None:
        return raw, seq


class HubFollower:
    """Yield every line after a position by long-polling the hub; backs off when it is down."""

    def __init__(
        self,
        client: RoomClient,
        start: Position,
        *,
        to: str | None = None,
        wait_s: float = 25.0,
    ) -> None:
        self._client = client
        self._seq = start.seq
        self._to = to
        self._wait = wait_s
        self._stop = asyncio.Event()
        self.log = _structlog("room.tail")

    def stop(self) -> None:
        self._stop.set()

    async def follow(self) -> AsyncIterator[tuple[Message, Position]]:
        from room.message import Message

        delay = 0.2
        while not self._stop.is_set():
            try:
                lines, last = await self._client.read(self._seq, 500, to=self._to, wait=self._wait)
            except HubUnavailable as exc:
                self.log.warning("hub unreachable; retrying", error=exc.message, retry_in_s=delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
                delay = min(delay * 2, 10.0)
                continue
            delay = 0.2
            if last < self._seq:
                raise CursorAhead(
                    f"the hub's room ends at seq {last}, but this reader already read up to "
                    f"seq {self._seq}: the room was truncated or replaced",
                    room_seq=last,
                    cursor_seq=self._seq,
                )
            for obj in lines:
                try:
                    message = Message.model_validate(obj)
                except ValueError as exc:  # a hub serves room lines only; never crash on one
                    seq = obj.get("seq") if isinstance(obj, dict) else None
                    self.log.warning(
                        "skipping a line that is not a room message",
                        seq=seq,
                        error=str(exc).splitlines()[0],
                    )
                    continue
                self._seq = max(self._seq, message.seq)
                yield message, Position(message.seq)
            self._seq = max(self._seq, last)

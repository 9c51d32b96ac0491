"""Waiting for a room file to change, at no cost while nothing happens.

Two ways to be woken, one interface (`await watch.changed(timeout)`):

- inotify (Linux, the default): the kernel's events arrive on a file
  descriptor the event loop already polls; idle costs nothing and a wake
  takes well under a millisecond.
- watchfiles (anywhere): portable, but its Rust loop checks for events every
  `step` milliseconds, so latency and idle CPU trade against each other
  (docs/performance.md has the measurements).

Both watch the room's folder, not the file, so a replaced or re-created
room is noticed; a change to the room's durable mark (room/durable.py),
rewritten after each fsync, counts as a change to the room. Each takes one inotify instance (128 per user by default);
when none is left, WatchUnavailable tells the caller to follow the hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from room.durable import mark_path

if TYPE_CHECKING:
    from asyncinotify import Watch as InotifyHandle


class WatchUnavailable(Exception):
    """No inotify instance (or watcher) could be had for the room's folder."""


class Watch(Protocol):
    async def changed(self, timeout: float) -> bool:
        """Wait for a change to the room file; False when `timeout` passed first."""
        ...

    def close(self) -> None: ...


class _EventWatch:
    """The shared wait: keep one pending event future across calls, so no event is lost
    when a wait times out."""

    _pending: asyncio.Future[object] | None = None

    def _next_event(self) -> Awaitable[object]:
        raise NotImplementedError

    def _is_change(self, event: object) -> bool:
        raise NotImplementedError

    async def changed(self, timeout: float) -> bool:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return False
            if self._pending is None:
                self._pending = asyncio.ensure_future(self._next_event())
            done, _ = await asyncio.wait([self._pending], timeout=remaining)
            if not done:
                return False
            try:
                event = self._pending.result()
            except OSError as exc:
                raise WatchUnavailable(f"watching the room failed ({exc})") from exc
            finally:
                self._pending = None
            if self._is_change(event):
                return True


class InotifyWatch(_EventWatch):
    """The room's folder for files appearing, moving and going, and one file's own writes: the
    durable mark's when there is one (only its rewrite, after an fsync, can bring a line a
    follower may deliver), else the room's. Watching the folder's writes as well woke every
    lurker three times a post (the nonce journal, the room, the mark) where once will do:
    twenty lurkers on two cores made that a herd (docs/performance.md, "Lurkers")."""

    def __init__(self, room: Path) -> None:
        from asyncinotify import Inotify, Mask

        self._room = room
        self._mark = mark_path(room)
        self._names = {room.name, self._mark.name}
        self._modify = Mask.MODIFY
        self._written: InotifyHandle | None = None  # the watch on the file whose writes count
        try:
            self._inotify = Inotify()
        except OSError as exc:
            raise WatchUnavailable(
                f"no inotify instance left ({exc.strerror}); raise fs.inotify.max_user_instances "
                "or run fewer watchers"
            ) from exc
        mask = (
            Mask.CREATE
            | Mask.MOVED_TO
            | Mask.MOVED_FROM
            | Mask.DELETE
            | Mask.CLOSE_WRITE
            | Mask.ATTRIB
        )
        try:
            self._inotify.add_watch(room.parent, mask)
            self._watch_writes()
        except OSError as exc:
            self._inotify.close()
            _no_watch_left(exc)
            raise

    def _watch_writes(self) -> None:
        """Watch the mark's writes when it is there, else the room's (a room with no mark
        delivers every whole line); called again whenever either file appears or goes."""
        if self._written is not None:
            with contextlib.suppress(OSError, ValueError):
                self._inotify.rm_watch(self._written)
            self._written = None
        for target in (self._mark, self._room):
            try:
                self._written = self._inotify.add_watch(target, self._modify)
                return
            except FileNotFoundError:
                continue  # not there (yet): its folder's CREATE will call again

    def _next_event(self) -> Awaitable[object]:
        return self._inotify.get()

    def _is_change(self, event: object) -> bool:
        name = getattr(event, "name", None)
        if name is None:  # a write to the watched file itself
            return True
        if str(name) not in self._names:
            return False
        try:
            self._watch_writes()
        except OSError as exc:
            _no_watch_left(exc)
            raise
        return True

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
        self._inotify.close()


class WatchfilesWatch(_EventWatch):
    """The portable watcher; `step_ms` is its latency floor and its idle cost."""

    def __init__(self, room: Path, step_ms: int = 20) -> None:
        import watchfiles

        self._stop = asyncio.Event()
        targets = {str(room), str(mark_path(room))}
        self._changes = watchfiles.awatch(
            room.parent,
            watch_filter=lambda _change, path: path in targets,
            debounce=50,
            step=step_ms,
            rust_timeout=1000,
            yield_on_timeout=True,
            recursive=False,
            stop_event=self._stop,
        ).__aiter__()

    def _next_event(self) -> Awaitable[object]:
        return self._changes.__anext__()

    def _is_change(self, event: object) -> bool:
        return bool(event)

    def close(self) -> None:
        self._stop.set()
        if self._pending is not None:
            self._pending.cancel()


def _no_watch_left(exc: OSError) -> None:
    """WatchUnavailable when `exc` says the user's inotify watches are all taken."""
    if exc.errno == errno.ENOSPC:
        raise WatchUnavailable("no inotify watch left (fs.inotify.max_user_watches)") from exc


def open_watch(room: Path, kind: str = "auto") -> Watch:
    """The best watcher for this platform, or the one asked for."""
    if kind == "watchfiles" or (kind == "auto" and not sys.platform.startswith("linux")):
        return WatchfilesWatch(room)
    return InotifyWatch(room)

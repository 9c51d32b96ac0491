"""The default engine: room.jsonl on a local disk, written by exactly one hub.

- One writer: an exclusive flock on `<room>.lock` for the hub's lifetime.
- Group commit: posts that arrive while a batch is being fsynced form the
  next batch; each is acknowledged only after its batch is on disk.
- Fail-stop: a failed write or fsync truncates back to the last good size,
  rejects everything in flight and stops the hub; it is never retried.
- Recovery (room/recovery.py): a torn tail found at start-up is moved to a
  side file next to the room and reported; damage a crash cannot explain
  stops the start and moves nothing.
- Durable before seen: after each batch the durable mark (room/durable.py)
  says how far the room is fsynced; file followers deliver no further.
- One sync per batch: a proof's nonce rides in its line (trust/nonces.py),
  so nothing beside the room is synced before it.
"""

from __future__ import annotations

import asyncio
import bisect
import errno
import json
import os
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import structlog

from room import durable, pidlock
from room.chain import GENESIS, line_hash
from room.errors import DurabilityError, RoomLocked
from room.fileio import FileIO, fsync_dir
from room.gather import Gathering
from room.ids import IdClock
from room.linecache import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, LineCache
from room.log import Draft, Filter, Head, OpenReport, ReadResult, RoomLog, Stored, build_line
from room.message import parse_line
from room.reader import RoomFile, seq_of
from room.recovery import MAX_BATCH_BYTES, Checkpointed, recover
from room.scanpool import ScanPool
from room.syncthread import SyncThread
from room.threads import ThreadIndex, pick

__all__ = ["MAX_BATCH_BYTES", "Checkpointed", "JsonlLog", "lock_path"]

log = structlog.get_logger("room.jsonl")


def lock_path(room: Path) -> Path:
    return room.with_name(room.name + ".lock")


def _take_lock(room: Path) -> int:
    try:
        return pidlock.take(lock_path(room))
    except pidlock.Held as held:
        raise RoomLocked(
            f"another hub (pid {held.holder}) already holds the room {room}; stop it first "
            "(systemctl --user stop bullpen-hub, or Ctrl-C in its terminal) or point "
            "this hub at another room",
            room=str(room),
        ) from None


class _Cached:
    __slots__ = ("raw", "sender", "seq", "thread", "to", "verified")

    def __init__(self, stored: Stored) -> None:
        self.seq = stored.seq
        self.raw = stored.raw
        self.sender = stored.sender
        self.to = stored.to
        self.thread = stored.thread
        self.verified = stored.verified


class _Done:
    """A queued post's callback, shaped like the future `append` awaits (set once)."""

    __slots__ = ("_callback",)

    def __init__(self, callback: Callable[[Stored | BaseException], None]) -> None:
        self._callback: Callable[[Stored | BaseException], None] | None = callback

    def done(self) -> bool:
        return self._callback is None

    def set_result(self, result: Stored | BaseException) -> None:
        callback, self._callback = self._callback, None
        if callback is None:
            return
        try:
            callback(result)
        except Exception:  # an answer that could not be written must not stop the writer
            log.exception("answering a stored post failed")

    set_exception = set_result


_Pending = asyncio.Future[Stored] | _Done


class JsonlLog(RoomLog):
    def __init__(
        self,
        path: Path,
        *,
        io: FileIO | None = None,
        checkpoint: Checkpointed | None = None,
        cache_lines: int = DEFAULT_MAX_LINES,
        cache_max_bytes: int = DEFAULT_MAX_BYTES,  # [hub] cache_max_bytes (room/linecache.py)
        thread_index_size: int = 1024,
    ) -> None:
        self.path = path
        self._io = io or FileIO()
        self._checkpoint = checkpoint
        self._mark: durable.MarkWriter | None = None
        self._cache: LineCache[_Cached] = LineCache(cache_max_bytes, cache_lines)
        self._threads = ThreadIndex(thread_index_size)
        self._building: dict[str, asyncio.Future[tuple[list[int], int]]] = {}
        self._scans = ScanPool()  # reads that scan the file: few at once (room/scanpool.py)
        # The writer's own thread (the room's write and fsync): reads run
        # elsewhere, so no read can queue in front of a write.
        self._syncer = SyncThread(self._write_and_sync)
        self._ids = IdClock()
        self._queue: list[tuple[Draft, _Pending]] = []
        self._fd = -1
        self._lock_fd = -1
        self._size = 0
        self._head = Head(0, GENESIS)
        self._failed: DurabilityError | None = None
        self._closing = False
        self._writer_task: asyncio.Task[None] | None = None
        self._kick: asyncio.Event | None = None
        self._gathering: Gathering | None = None
        self._reader: RoomFile | None = None

    @property
    def head(self) -> Head:
        return self._head

    @property
    def failed(self) -> DurabilityError | None:
        return self._failed

    def describe(self) -> dict[str, str]:
        return {"room": str(self.path)}

    def stored_bytes(self) -> int | None:
        return self._size

    async def open(self) -> OpenReport:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _take_lock(self.path)
        try:
            new = not self.path.exists()
            self._fd = os.open(
                self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600
            )
            if new:  # the room's name must survive a power loss before any line is acked
                fsync_dir(self.path.parent)
            self._head, self._size, notes = recover(
                self.path,
                self._fd,
                self._io,
                checkpoint=self._checkpoint,
                mark=durable.load(self.path),
            )
            self._mark = durable.MarkWriter(self.path)  # published once the hub serves
        except OSError as exc:
            self._release()
            raise DurabilityError(
                f"recovering the room {self.path} failed ({exc.strerror or exc}); "
                "free space or fix the disk, then start the hub again",
                errno=exc.errno,
            ) from None
        except BaseException:
            self._release()
            raise
        self._reader = RoomFile(self.path)
        self._kick = asyncio.Event()
        self._gathering = Gathering(self._kick.set)
        self._writer_task = asyncio.create_task(self._writer(), name="room-writer")
        return OpenReport(self._head, notes)

    async def append(self, draft: Draft) -> Stored:
        if self._failed is not None:
            raise self._failed
        if self._closing or self._kick is None:
            raise DurabilityError("the room is closing; post again once the hub is back")
        future: asyncio.Future[Stored] = asyncio.get_running_loop().create_future()
        self._queue.append((draft, future))
        self._queued()
        return await future

    def submit(self, draft: Draft, done: Callable[[Stored | BaseException], None]) -> None:
        """`append` for the direct /say path: `done` is called from the writer, no future."""
        if self._failed is not None:
            done(self._failed)
            return
        if self._closing or self._kick is None:
            done(DurabilityError("the room is closing; post again once the hub is back"))
            return
        self._queue.append((draft, _Done(done)))
        self._queued()

    def _queued(self) -> None:
        assert self._gathering is not None
        self._gathering.queued(len(self._queue))

    async def _writer(self) -> None:
        assert self._kick is not None
        while True:
            await self._kick.wait()
            self._kick.clear()
            if not self._queue:
                if self._closing:
                    return
                continue
            try:
                done = await self._write_batch()
            except Exception as exc:  # a bug, not the disk: stop, rather than leave posters hanging
                self._fail(exc, [])
                return
            if done:
                return

    async def _write_batch(self) -> bool:
        """Write and sync the next batch and acknowledge it; True when the writer should stop."""
        assert self._kick is not None
        seq, prev = self._head.seq, self._head.hash
        stored: list[Stored] = []
        nbytes = 0
        for draft, _ in self._queue:
            ulid, ms = self._ids.next()
            raw = build_line(seq + 1, ulid, ms, draft, prev)
            if stored and nbytes + len(raw) + 1 > MAX_BATCH_BYTES:
                self._kick.set()  # the rest goes out in the next batch
                break
            seq += 1
            nbytes += len(raw) + 1
            prev = line_hash(raw)
            post = draft.post
            stored.append(Stored(seq, raw, post.from_, post.to, post.thread, draft.verified))
        batch, self._queue = self._queue[: len(stored)], self._queue[len(stored) :]
        blob = b"".join(s.raw + b"\n" for s in stored)
        assert self._gathering is not None
        self._gathering.writing()
        started = time.perf_counter()
        try:
            await self._syncer.run(blob)
            self._publish(self._size + len(blob), Head(seq, prev))
        except Exception as exc:
            self._fail(exc, batch)  # every post of this batch and the queue is refused
            return True
        self._commit(stored, len(blob), Head(seq, prev))
        for (_, future), line in zip(batch, stored, strict=True):
            if not future.done():
                future.set_result(line)
        if not self._closing:  # the next batch: when the posters just answered are back
            self._gathering.written(len(stored), len(self._queue), time.perf_counter() - started)
        return self._closing and not self._queue

    def _write_and_sync(self, blob: bytes) -> None:
        written = self._io.write(self._fd, blob)
        if written != len(blob):
            raise OSError(errno.EIO, f"short write: {written} of {len(blob)} bytes")
        self._io.fsync(self._fd)

    def serving(self) -> None:
        """Every start-up check passed: followers may now act on the room as recovered.

        Not at open: a hub that then refuses the room (a line appended behind its
        back, a contradicted checkpoint) must not tell lurkers that line is durable.
        """
        self._publish()

    def _publish(self, size: int | None = None, head: Head | None = None) -> None:
        """Tell file followers how far the room is durable (after the fsync, never before)."""
        assert self._mark is not None
        head = head or self._head
        self._mark.publish(durable.Mark(head.seq, self._size if size is None else size, head.hash))

    def _commit(self, stored: list[Stored], nbytes: int, head: Head) -> None:
        self._size += nbytes
        self._head = head
        for line in stored:
            self._cache.append(_Cached(line))
            if line.thread is not None:
                self._threads.stored(line.thread, line.seq)
        if self.on_stored is not None:
            self.on_stored(stored)
        self._wake_readers()

    def _fail(self, exc: BaseException, batch: list[tuple[Draft, _Pending]]) -> None:
        try:
            self._io.truncate(self._fd, self._size)
            os.fsync(self._fd)
            cut = "the partial batch was cut off"
        except Exception as cut_exc:
            why = cut_exc.strerror if isinstance(cut_exc, OSError) else cut_exc
            cut = (
                f"cutting the partial batch off also failed ({why}); the next start moves it aside"
            )
        if isinstance(exc, OSError):
            self._failed = DurabilityError(
                f"writing the room failed ({exc.strerror or exc}); {cut}. The hub stopped "
                "acknowledging posts: nothing acknowledged was lost. Free space or fix the disk, "
                "then start the hub again",
                errno=exc.errno,
            )
            log.error("room write failed; stopping", error=str(exc), size=self._size)
        else:
            self._failed = DurabilityError(
                f"the room's writer failed unexpectedly ({type(exc).__name__}: {exc}); {cut}. "
                "The hub stopped acknowledging posts: nothing acknowledged was lost. This is a "
                "bug: report it with the hub's log, then start the hub again"
            )
            log.error(
                "room writer failed; stopping",
                error=f"{type(exc).__name__}: {exc}",
                size=self._size,
                exc_info=exc,
            )
        for _, future in batch + self._queue:
            if not future.done():
                future.set_exception(self._failed)
        self._queue = []
        if self.on_fatal is not None:
            self.on_fatal(self._failed)

    async def read(self, after: int, limit: int, flt: Filter) -> ReadResult:
        head, end = self._head.seq, self._size
        if after >= head or limit <= 0:
            return ReadResult([], head)
        if flt.thread is not None:
            return await self._read_thread(after, limit, flt, head, end)
        if self._cache.holds_after(after):
            lines = []
            for entry in self._cache:
                if entry.seq > after and flt.matches(
                    entry.sender, entry.to, entry.thread, entry.verified
                ):
                    lines.append(entry.raw)
                    if len(lines) == limit:
                        return ReadResult(lines, entry.seq)
            return ReadResult(lines, head)
        return await self._scans.run(self._scan, after, limit, flt, head, end)

    def _scan(self, after: int, limit: int, flt: Filter, head: int, end: int) -> ReadResult:
        assert self._reader is not None
        lines: list[bytes] = []
        offset = self._reader.offset_after(after, end)
        for _, raw in self._reader.lines_holding(flt.prefilter(), offset, end):
            if not flt.empty:
                try:
                    msg = parse_line(raw)
                except ValueError:
                    continue
                if not flt.matches(msg.from_, msg.to, msg.thread, msg.verified):
                    continue
            lines.append(raw)
            if len(lines) == limit:
                return ReadResult(lines, seq_of(raw))
        return ReadResult(lines, head)

    async def _read_thread(
        self, after: int, limit: int, flt: Filter, head: int, end: int
    ) -> ReadResult:
        thread = flt.thread
        assert thread is not None
        seqs = self._threads.get(thread)
        if seqs is None and await self._threads.absent(thread, partial(self._raw, self._size)):
            seqs = self._threads.get(thread)  # indexed meanwhile by its first line, or new
            if seqs is None:
                seqs = self._threads.put(thread, [])
        if seqs is None:  # one scan per thread, however many readers ask (or go away)
            building = self._building.get(thread)
            if building is None:
                building = self._building[thread] = asyncio.ensure_future(
                    self._index_thread(thread, head, end)
                )
                building.add_done_callback(lambda _: self._building.pop(thread, None))
            built, head = await asyncio.shield(building)
            seqs = built
        wanted = seqs[bisect.bisect_right(seqs, after) : bisect.bisect_right(seqs, head)]
        narrower = flt != Filter(thread=thread)
        lines: list[bytes] = []
        first = self._cache.first_seq
        older = bisect.bisect_left(wanted, first) if first is not None else len(wanted)
        assert self._reader is not None
        if older:  # not in the cache: one pass over the file, off the event loop
            picked = await self._scans.run(
                pick, self._reader, wanted[:older], thread, flt if narrower else None, limit, end
            )
            if len(picked.lines) == limit:
                return picked
            lines, wanted = picked.lines, wanted[older:]
        for seq in wanted:
            cached = self._cached(seq)
            if cached is None:  # dropped from the cache while the older lines were read
                lines += pick(self._reader, [seq], thread, flt if narrower else None, 1, end).lines
            elif not narrower or flt.matches(
                cached.sender, cached.to, cached.thread, cached.verified
            ):
                lines.append(cached.raw)  # filtered on what the cache holds: nothing to parse
            if len(lines) == limit:
                return ReadResult(lines, seq)
        return ReadResult(lines, head)

    async def _index_thread(self, thread: str, head: int, end: int) -> tuple[list[int], int]:
        """The seqs of `thread`'s lines, found by a scan (off the event loop) and indexed."""
        seqs = await self._scans.run(self._thread_seqs, thread, end)
        # Lines appended while the scan ran are in the cache; add them before indexing.
        first = self._cache.first_seq
        if first is None or first <= head + 1:
            seqs += [c.seq for c in self._cache if c.seq > head and c.thread == thread]
            self._threads.put(thread, seqs)
            return seqs, self._head.seq
        return seqs, head

    def _thread_seqs(self, thread: str, end: int) -> list[int]:
        """Every seq in `thread`, by its needle and then a plain JSON look (no model parse)."""
        assert self._reader is not None
        needle = Filter(thread=thread).prefilter()[0]
        return [
            seq_of(raw)
            for _, raw in self._reader.lines_containing(needle, 0, end)
            if json.loads(raw).get("thread") == thread
        ]

    def _raw(self, end: int) -> Iterator[bytes]:
        assert self._reader is not None
        for _, raw in self._reader.lines_from(0, end):
            yield raw

    def _cached(self, seq: int) -> _Cached | None:
        return self._cache.get(seq)

    async def close(self) -> None:
        self._closing = True
        if self._gathering is not None:
            self._gathering.close()
        if self._kick is not None:
            self._kick.set()
        if self._writer_task is not None:
            await self._writer_task
            self._writer_task = None
        await self._scans.close()
        self._release()

    def _release(self) -> None:
        self._syncer.stop()
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._mark is not None:
            self._mark.close()
            self._mark = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

"""The default engine: room.jsonl on a local disk, written by exactly one hub.

- One writer: an exclusive flock on `<room>.lock` for the hub's lifetime.
- Group commit: posts that arrive while a batch is being fsynced form the
  next batch; each is acknowledged only after its batch is on disk.
- Fail-stop: a failed write or fsync truncates back to the last good size,
  rejects everything in flight and stops the hub; it is never retried.
- Recovery: a torn or unparseable tail found at start-up is moved to a side
  file next to the room and reported, never silently dropped.

Why recovery re-checks a whole tail, not just the last line: a power failure
can leave any part of the last unsynced write on disk — a prefix, or 512-byte
sectors in any order, zeroed or garbled — so a damaged line can sit before
lines that look whole. Writes are bounded (MAX_BATCH_BYTES, each synced
before the next, and recovery syncs what it keeps), so only the last
TAIL_CHECK_BYTES can hold unsynced bytes; every line there is checked in order.
"""

from __future__ import annotations

import asyncio
import errno
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import structlog

from room import pidlock
from room.chain import GENESIS, line_hash
from room.errors import DurabilityError, RoomCorrupt, RoomLocked
from room.fileio import FileIO, fsync_dir
from room.ids import IdClock
from room.log import Draft, Filter, Head, OpenReport, ReadResult, RoomLog, Stored, build_line
from room.message import Message, parse_line
from room.reader import RoomFile, seq_of
from room.threadscan import Scanner

log = structlog.get_logger("room.jsonl")

MAX_TAIL_GARBAGE = 64 * 1024 * 1024
# One write of a batch holds at most this many bytes (a single line is always
# smaller: a post's body is at most 64 KiB, 384 KiB escaped, and its data 256 KiB).
MAX_BATCH_BYTES = 1024 * 1024
# Recovery checks every line this far back from the end: more than one batch.
TAIL_CHECK_BYTES = 2 * MAX_BATCH_BYTES


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


def move_aside(room: Path, fd: int, keep: int, size: int, why: str, io: FileIO) -> Path:
    """Copy bytes [keep, size) to a new side file, then cut the room back to `keep`."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    n = 0
    while True:
        side = room.with_name(f"{room.name}.torn-{stamp}" + (f"-{n}" if n else ""))
        try:
            side_fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o640)
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


def _last_message_end(room: Path, reader: RoomFile, fd: int, size: int) -> int:
    """The offset just past the last whole line that parses as a room message."""
    good = size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        good = reader._last_newline_before(size)
    while good > 0:
        start = reader._last_newline_before(good - 1)
        if _message(os.pread(fd, good - 1 - start, start)) is not None:
            break
        good = start
        if size - good > MAX_TAIL_GARBAGE:
            raise RoomCorrupt(
                f"the last {size - good} bytes of {room} hold no valid room line; "
                "this is more than a torn write. Run `bullpen audit` on it and move "
                "the damaged part aside by hand before starting the hub"
            )
    return good


def _check_tail(room: Path, reader: RoomFile, end: int) -> tuple[Head, int]:
    """Check every line in the last TAIL_CHECK_BYTES before `end`; return the head and where the room ends.

    The room ends before the first line there that is not a room message:
    from a crash, only unsynced bytes can be damaged, and a damaged line does
    not parse. A line that parses but does not follow the one before it
    cannot come from a crash, so it is reported as an edited file.
    """
    head = Head(0, GENESIS)
    start = reader._last_newline_before(end - TAIL_CHECK_BYTES) if end > TAIL_CHECK_BYTES else 0
    if start > 0:
        before = reader.last_line(start)
        anchor = None if before is None else _message(before[1])
        if before is None or anchor is None:
            raise RoomCorrupt(
                f"{room} is damaged {end - start} bytes or more before its end, further back "
                f"than a crash can reach; run `bullpen audit {room}` to find where",
            )
        head = Head(anchor.seq, line_hash(before[1]))
    good = start
    for offset, raw in reader.lines_from(start, end):
        message = _message(raw)
        if message is None:
            if offset == start and start > 0:
                raise RoomCorrupt(
                    f"{room} is damaged {end - offset} bytes before its end, further back than "
                    f"a crash can reach; run `bullpen audit {room}` to find where",
                )
            break  # a torn or garbled line from the last unsynced write: the room ends here
        if head.seq == 0 and (message.seq != 1 or message.prev != GENESIS):
            raise RoomCorrupt(
                f"{room} starts at seq {message.seq}, not 1; run `bullpen audit {room}`"
            )
        if message.seq != head.seq + 1 or message.prev != head.hash:
            raise RoomCorrupt(
                f"seq {message.seq} of {room} does not chain to the line before it; the file "
                f"was edited. Run `bullpen audit {room}` to find where",
                seq=message.seq,
            )
        head = Head(message.seq, line_hash(raw))
        good = offset + len(raw) + 1
    return head, good


def recover(room: Path, fd: int, io: FileIO | None = None) -> tuple[Head, int, list[str]]:
    """Find the end of the valid room; move anything after it aside. Returns (head, size, notes)."""
    io = io or FileIO()
    size = os.fstat(fd).st_size
    notes: list[str] = []
    reader = RoomFile(room)
    try:
        end = _last_message_end(room, reader, fd, size)
        head, good = _check_tail(room, reader, end)
        if good < size:
            side = move_aside(room, fd, good, size, "torn or unparseable tail", io)
            notes.append(
                f"moved {size - good} bytes of torn or unparseable tail from {room.name} "
                f"to {side.name}"
            )
        else:
            # A hub that died may have left lines it wrote but never synced: they are
            # the head now, so make them durable before anyone is served them.
            io.fsync(fd)
        return head, good, notes
    finally:
        reader.close()


class _Cached:
    __slots__ = ("raw", "sender", "seq", "thread", "to")

    def __init__(self, stored: Stored) -> None:
        self.seq = stored.seq
        self.raw = stored.raw
        self.sender = stored.sender
        self.to = stored.to
        self.thread = stored.thread


class JsonlLog(RoomLog):
    def __init__(
        self,
        path: Path,
        *,
        before_sync: Sequence[Callable[[], None]] = (),  # synced with every batch
        io: FileIO | None = None,
        cache_lines: int = 8192,
        thread_index_size: int = 1024,
    ) -> None:
        self.path = path
        self._before_sync = list(before_sync)
        self._io = io or FileIO()
        self._cache: deque[_Cached] = deque(maxlen=cache_lines)
        self._thread_index_size = thread_index_size
        self._scanner: Scanner | None = None
        # The writer's own threads (the room's write+fsync, and each before_sync hook):
        # reads run on the Scanner's thread, so no read can queue in front of a write.
        self._write_pool = ThreadPoolExecutor(
            max_workers=1 + len(self._before_sync), thread_name_prefix="room-writer"
        )
        self._ids = IdClock()
        self._queue: list[tuple[Draft, asyncio.Future[Stored]]] = []
        self._fd = -1
        self._lock_fd = -1
        self._size = 0
        self._head = Head(0, GENESIS)
        self._failed: DurabilityError | None = None
        self._closing = False
        self._writer_task: asyncio.Task[None] | None = None
        self._kick: asyncio.Event | None = None
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
            self._fd = os.open(
                self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o640
            )
            self._head, self._size, notes = recover(self.path, self._fd, self._io)
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
        self._scanner = Scanner(self._reader, self._thread_index_size)
        self._kick = asyncio.Event()
        self._writer_task = asyncio.create_task(self._writer(), name="room-writer")
        return OpenReport(self._head, notes)

    async def append(self, draft: Draft) -> Stored:
        if self._failed is not None:
            raise self._failed
        if self._closing or self._kick is None:
            raise DurabilityError("the room is closing; post again once the hub is back")
        future: asyncio.Future[Stored] = asyncio.get_running_loop().create_future()
        self._queue.append((draft, future))
        self._kick.set()
        return await future

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
            stored.append(Stored(seq, raw, post.from_, post.to, post.thread))
        batch, self._queue = self._queue[: len(stored)], self._queue[len(stored) :]
        blob = b"".join(s.raw + b"\n" for s in stored)
        # Side files (the nonce journal) sync on their own thread, alongside the
        # room's write and fsync: a batch costs one fsync's latency, not two.
        loop = asyncio.get_running_loop()
        outcomes = await asyncio.gather(
            *(loop.run_in_executor(self._write_pool, hook) for hook in self._before_sync),
            loop.run_in_executor(self._write_pool, self._write_and_sync, blob),
            return_exceptions=True,
        )
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors:
            self._fail(errors[0], batch)  # every post of this batch and the queue is refused
            return True
        self._commit(stored, len(blob), Head(seq, prev))
        for (_, future), line in zip(batch, stored, strict=True):
            if not future.done():
                future.set_result(line)
        return self._closing and not self._queue

    def _write_and_sync(self, blob: bytes) -> None:
        written = self._io.write(self._fd, blob)
        if written != len(blob):
            raise OSError(errno.EIO, f"short write: {written} of {len(blob)} bytes")
        self._io.fsync(self._fd)

    def _commit(self, stored: list[Stored], nbytes: int, head: Head) -> None:
        self._size += nbytes
        self._head = head
        for line in stored:
            self._cache.append(_Cached(line))
            index = self._scanner.index if self._scanner is not None else {}
            if line.thread is not None and line.thread in index:
                index[line.thread].append(line.seq)
        self._wake_readers()

    def _fail(self, exc: BaseException, batch: list[tuple[Draft, asyncio.Future[Stored]]]) -> None:
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
        if self._cache and after + 1 >= self._cache[0].seq:
            lines = []
            for entry in self._cache:
                if entry.seq > after and flt.matches(entry.sender, entry.to, entry.thread):
                    lines.append(entry.raw)
                    if len(lines) == limit:
                        return ReadResult(lines, entry.seq)
            return ReadResult(lines, head)
        assert self._scanner is not None
        return await self._scanner.run(self._scan, after, limit, flt, head, end)

    def _scan(self, after: int, limit: int, flt: Filter, head: int, end: int) -> ReadResult:
        assert self._reader is not None
        needles = flt.prefilter()
        lines: list[bytes] = []
        offset = self._reader.offset_after(after, end)
        for _, raw in self._reader.lines_from(offset, end):
            if needles and not all(n in raw for n in needles):
                continue
            if not flt.empty:
                try:
                    msg = parse_line(raw)
                except ValueError:
                    continue
                if not flt.matches(msg.from_, msg.to, msg.thread):
                    continue
            lines.append(raw)
            if len(lines) == limit:
                return ReadResult(lines, seq_of(raw))
        return ReadResult(lines, head)

    async def _read_thread(
        self, after: int, limit: int, flt: Filter, head: int, end: int
    ) -> ReadResult:
        thread = flt.thread
        assert thread is not None and self._scanner is not None
        scanner = self._scanner
        seqs = scanner.index.get(thread)
        if seqs is None:
            while True:
                found, covered = await scanner.scan(thread, head, end)
                # Lines stored since the scan's head are in the cache, unless it moved past them.
                if not self._cache or self._cache[0].seq <= covered + 1:
                    break
                head, end = self._head.seq, self._size  # a very long scan: once more
            seqs = found + [c.seq for c in self._cache if c.seq > covered and c.thread == thread]
            scanner.remember(thread, seqs)
            head = max(head, covered)
        else:
            scanner.index.move_to_end(thread)
        wanted = [s for s in seqs if after < s <= head]
        first_cached = self._cache[0].seq if self._cache else head + 1
        if wanted and wanted[0] < first_cached:  # some have left the cache: read the file
            lines = await scanner.run(scanner.file_lines, wanted, end, flt, limit)
            if len(lines) == limit:
                return ReadResult(lines, seq_of(lines[-1]))
            return ReadResult(lines, head)
        narrower = flt.to is not None or flt.sender is not None
        lines = []
        for seq in wanted:
            entry = self._cache[seq - first_cached]
            if narrower and not flt.matches(entry.sender, entry.to, entry.thread):
                continue
            lines.append(entry.raw)
            if len(lines) == limit:
                return ReadResult(lines, seq)
        return ReadResult(lines, head)

    async def close(self) -> None:
        self._closing = True
        if self._kick is not None:
            self._kick.set()
        if self._writer_task is not None:
            await self._writer_task
            self._writer_task = None
        self._release()

    def _release(self) -> None:
        if self._scanner is not None:
            self._scanner.close()
            self._scanner = None
        self._write_pool.shutdown(wait=False)
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

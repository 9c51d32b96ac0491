"""The room's log, as the hub sees it: one small interface, several engines.

An engine stamps each accepted post with `seq`, `id`, `ts` and `prev`,
makes it durable, and only then returns it; it serves reads from a seq with
optional filters, and wakes long-polling readers when lines arrive. The JSONL
file is the default engine; another (a replicated stream) can stand behind
the same interface without the hub or the gate changing.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from room import strictjson
from room.errors import DurabilityError
from room.ids import rfc3339_ms
from room.message import Post


@dataclass(frozen=True)
class Draft:
    """An accepted post on its way into the log."""

    post: Post
    verified: bool
    via: str | None = None  # how a proofless verified post was admitted (room/message.py)
    nonce: str | None = None  # a shared-secret proof's nonce: the room remembers it (no journal)


@dataclass(frozen=True)
class Stored:
    """A line as written: its seq, its exact bytes (no newline) and its fields."""

    seq: int
    raw: bytes
    sender: str
    to: str
    thread: str | None
    verified: bool


@dataclass(frozen=True)
class Filter:
    """Which lines a reader wants; empty fields match everything."""

    thread: str | None = None
    to: str | None = None  # "@nick"
    sender: str | None = None
    # Any of these senders (`from=` repeated): a reader that trusts only some nicks, like the
    # foreman, is sent none of the others' lines, however many there are.
    senders: frozenset[str] | None = None
    verified: bool | None = None  # True: only lines the gate verified (`verified=true`)

    @property
    def empty(self) -> bool:
        return (
            self.thread is None
            and self.to is None
            and self.sender is None
            and self.senders is None
            and self.verified is None
        )

    def matches(self, sender: str, to: str, thread: str | None, verified: bool = False) -> bool:
        return (
            (self.thread is None or self.thread == thread)
            and (self.to is None or self.to == to)
            and (self.sender is None or self.sender == sender)
            and (self.senders is None or sender in self.senders)
            and (self.verified is None or self.verified == verified)
        )

    def prefilter(self) -> list[bytes]:
        """Byte strings every matching compact line must contain: a cheap first pass."""
        needles = []
        if self.thread is not None:
            needles.append(b'"thread":' + strictjson.dumps(self.thread).encode())
        if self.to is not None:
            needles.append(b'"to":' + strictjson.dumps(self.to).encode())
        if self.sender is not None:
            needles.append(b'"from":' + strictjson.dumps(self.sender).encode())
        if self.verified:
            needles.append(b'"verified":true')
        return needles


@dataclass(frozen=True)
class ReadResult:
    """Matching lines, and the seq this answer covers up to (pass it as `after` next)."""

    lines: list[bytes]
    last_seq: int


@dataclass
class Head:
    seq: int
    hash: str


@dataclass
class OpenReport:
    """What an engine found and did while opening."""

    head: Head
    notes: list[str] = field(default_factory=list)


def build_line(seq: int, ulid: str, ms: int, draft: Draft, prev: str) -> bytes:
    """The stored line's exact bytes, fields in a fixed order, without the newline."""
    post = draft.post
    obj = {
        "seq": seq,
        "id": ulid,
        "ts": rfc3339_ms(ms),
        "from": post.from_,
        "to": post.to,
        "type": post.type,
        "body": post.body,
        "data": post.data,
        "in_reply_to": post.in_reply_to,
        "thread": post.thread,
        "sig": None if post.sig is None else post.sig.model_dump(),
        "verified": draft.verified,
    }
    if draft.via is not None:  # only where it matters: most lines stay as they were
        obj["via"] = draft.via
    if draft.nonce is not None:  # a proved post's nonce, durable with its line (one fsync)
        obj["nonce"] = draft.nonce
    obj["prev"] = prev
    return strictjson.dumps(obj).encode("utf-8")


class RoomLog(abc.ABC):
    """One writer's view of the room."""

    @abc.abstractmethod
    async def open(self) -> OpenReport:
        """Take ownership of the room, recover its tail, and report what was found."""

    @abc.abstractmethod
    async def append(self, draft: Draft) -> Stored:
        """Stamp, store durably, and return the line; raise DurabilityError if it could not."""

    def submit(self, draft: Draft, done: Callable[[Stored | BaseException], None]) -> None:
        """`append` without awaiting it: `done` gets the stored line or the error, once.

        The hub's direct /say path (room/direct.py) answers from `done`; an engine
        that can hand it to its writer as is (JSONL) saves a task and a future per post.
        """

        async def run() -> None:
            try:
                stored = await self.append(draft)
            except Exception as exc:
                done(exc)
                return
            done(stored)

        task = asyncio.get_running_loop().create_task(run())
        self._submitted.add(task)
        task.add_done_callback(self._submitted.discard)

    _submitted: ClassVar[set[asyncio.Task[None]]] = set()  # held until done (weak in the loop)

    @abc.abstractmethod
    async def read(self, after: int, limit: int, flt: Filter) -> ReadResult:
        """Lines with seq > after that match, at most `limit` of them."""

    _appended: asyncio.Event | None = None  # set, then replaced, each time lines are stored
    readers_waiting = 0  # long-polls waiting now (shown by /health)

    def _wake_readers(self) -> None:
        """Lines were stored: wake every `wait_for_lines` (an engine calls this)."""
        woken, self._appended = self._appended, asyncio.Event()
        if woken is not None:
            woken.set()

    async def wait_for_lines(self, after: int, timeout: float) -> bool:
        """Wait until the room holds a line beyond `after`; False on timeout."""
        if self.head.seq > after:
            return True
        if self._appended is None:
            self._appended = asyncio.Event()
        self.readers_waiting += 1
        try:
            await asyncio.wait_for(self._appended.wait(), timeout)
        except TimeoutError:
            return False
        finally:
            self.readers_waiting -= 1
        return self.head.seq > after

    def serving(self) -> None:
        """The hub passed every start-up check and serves this room: publish what it holds
        (the JSONL engine's durable mark). Nothing is published before: a refused start
        tells no follower anything."""
        return None  # an engine with nothing to publish (JetStream: the stream is the record)

    @abc.abstractmethod
    async def close(self) -> None:
        """Finish pending work and release the room."""

    @property
    @abc.abstractmethod
    def head(self) -> Head:
        """The last stored line's seq and hash."""

    async def line_at(self, seq: int) -> bytes | None:
        """The exact bytes stored at `seq` (None past the end), whatever they hold."""
        found = await self.read(seq - 1, 1, Filter())
        return found.lines[0] if found.lines else None

    @property
    def failed(self) -> DurabilityError | None:
        """The failure that stopped this log for good (the hub exits on it), or None."""
        return None

    @property
    def unavailable(self) -> str | None:
        """Why no line can be stored right now, while the log waits to recover; None when it can."""
        return None

    def describe(self) -> dict[str, str]:
        """Where the room is, for the hub's start-up line."""
        return {}

    def stored_bytes(self) -> int | None:
        """How many bytes the room holds, where the engine knows (for /health); else None."""
        return None

    on_fatal: Callable[[BaseException], None] | None = None
    # Every line the room now holds, in seq order, as it is stored (the hub's Merkle tree,
    # room/tlog.py): the JSONL writer after its fsync, the JetStream view as it follows.
    on_stored: Callable[[list[Stored]], None] | None = None

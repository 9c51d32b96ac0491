"""The room as the web view sees it: read through the hub's `/read`, audited, fanned out.

One task long-polls the strict listener with the read token (so a remote
hub and a JetStream room serve it as well as a local file), takes each
line's exact bytes out of the answer, checks the audit chain as it goes
(seq 1, 2, 3 …, each `prev` the SHA-256 of the line before), and hands
every new line to each open server-sent-events stream at once. The hub
answers a long-poll the moment it commits a line, so a post reaches a page
a few milliseconds after its ack.

It keeps the newest KEEP lines' bytes in memory (a page asks only for the
newest ones, older ones as it scrolls); anything before them is read from
the hub again when a page scrolls that far. A hub that goes away is retried
with backoff; the streams stay open and carry on when it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import structlog

from room.chain import GENESIS, line_hash
from room.httpverify import verify_tls

log = structlog.get_logger("agents.web.feed")

KEEP = 250_000
PAGE = 1000
WAIT_S = 25.0
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class LineFilter:
    """`bullpen tail`'s filters, and the message type: a line shows when every given one holds."""

    thread: str | None = None
    sender: str | None = None
    to: str | None = None
    type: str | None = None

    @classmethod
    def of(cls, params: Any) -> LineFilter:
        def get(name: str) -> str | None:
            value = str(params.get(name) or "").strip()
            return value or None

        to = get("to")
        if to is not None and not to.startswith("@"):
            to = "@" + to
        sender = get("from")
        return cls(get("thread"), sender.removeprefix("@") if sender else None, to, get("type"))

    def matches(self, line: dict[str, Any]) -> bool:
        return (
            (self.thread is None or line.get("thread") == self.thread)
            and (self.sender is None or line.get("from") == self.sender)
            and (self.to is None or line.get("to") == self.to)
            and (self.type is None or line.get("type") == self.type)
        )


def split_answer(body: bytes) -> tuple[list[tuple[bytes, dict[str, Any]]], int]:
    """A `/read` answer's lines, each as (its exact bytes, parsed), and its last_seq."""
    text = body.decode("utf-8")
    head = '{"messages":['
    if not text.startswith(head):
        answer = json.loads(text)
        return [(json.dumps(m).encode(), m) for m in answer["messages"]], int(answer["last_seq"])
    lines: list[tuple[bytes, dict[str, Any]]] = []
    pos = len(head)
    while text[pos] != "]":
        obj, end = _DECODER.raw_decode(text, pos)
        lines.append((text[pos:end].encode("utf-8"), obj))
        pos = end + 1 if text[end] == "," else end
    tail = json.loads("{" + text[pos + 2 :])
    return lines, int(tail["last_seq"])


@dataclass
class Chain:
    """The audit as far as it got: the last seq it checked, and the first bad one."""

    audited: int = 0
    prev: str = GENESIS
    broken_seq: int | None = None
    broken_reason: str = ""
    hashes: dict[int, str] = field(default_factory=dict)  # seq -> hash, for checkpoints

    def check(self, raw: bytes, line: dict[str, Any]) -> None:
        if self.broken_seq is not None:
            return
        seq = line.get("seq")
        if seq != self.audited + 1:
            self.broken_seq, self.broken_reason = (
                self.audited + 1,
                f"seq {seq} follows seq {self.audited}: a line is missing or out of order",
            )
        elif line.get("prev") != self.prev:
            self.broken_seq, self.broken_reason = (
                int(seq),
                f"seq {seq}'s prev is not the hash of seq {self.audited}: a line was changed",
            )
        else:
            self.audited, self.prev = int(seq), line_hash(raw)
            self.hashes[self.audited] = self.prev
            if len(self.hashes) > KEEP:
                for old in list(self.hashes)[: len(self.hashes) - KEEP]:
                    del self.hashes[old]


class Feed:
    """Every line of the room, read once from the hub and handed to every subscriber."""

    def __init__(self, url: str, token: bytes, *, keep: int = KEEP) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers={"authorization": f"Bearer {token.decode().strip()}"},
            timeout=httpx.Timeout(10.0, read=WAIT_S + 10.0),
            verify=verify_tls(self.url),
        )
        self.keep = keep
        self.raw: list[bytes] = []  # the newest lines' bytes; raw[0] is seq first_seq
        self.first_seq = 1
        self.seq = 0  # the last seq read
        self.head = 0  # the hub's last seq, as its last answer said
        self.chain = Chain()
        self.threads: dict[str, list[dict[str, Any]]] = {}
        self.last_from: dict[str, dict[str, Any]] = {}
        self.seats: dict[str, str] = {}  # nick -> the seat its last judgment named
        self.connected = False
        self.caught_up = asyncio.Event()
        self.problem: str | None = None
        self._subscribers: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self._listeners: list[Callable[[dict[str, Any]], None]] = []
        self._task: asyncio.Task[None] | None = None
        self.extra_status: Callable[[], dict[str, Any]] | None = None  # the checkpoint's word

    # -- reading ---------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.close_streams()
        await self._http.aclose()

    def close_streams(self) -> None:
        """End every open stream (the server is stopping)."""
        for queue in list(self._subscribers):
            queue.put_nowait(None)

    async def read(self, after: int, limit: int, wait: float = 0) -> tuple[list[Any], int]:
        params: dict[str, Any] = {"after": after, "limit": limit}
        if wait:
            params["wait"] = wait
        response = await self._http.get("/read", params=params)
        if response.status_code != 200:
            raise httpx.HTTPStatusError(
                f"the hub answered {response.status_code}",
                request=response.request,
                response=response,
            )
        return split_answer(response.content)

    async def _run(self) -> None:
        delay = 0.2
        while True:
            wait = WAIT_S if self.caught_up.is_set() else 0
            try:
                lines, last = await self.read(self.seq, PAGE, wait)
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                if self.connected:
                    log.warning("the hub stopped answering; retrying", error=str(exc)[:200])
                refused = isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code in (
                    401,
                    403,
                )
                self.problem = (
                    "the hub refuses this view's read token: is secrets/read-token the hub's? "
                    "(copy it from the hub's home, then restart `bullpen web`)"
                    if refused
                    else None
                )
                self.connected = False
                self._notify({"kind": "status"})
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            if not self.connected:
                self.connected, self.problem = True, None
                self._notify({"kind": "status"})
            delay = 0.2
            if last < self.seq:
                self.problem = (
                    f"the hub's room ends at seq {last}, but this view already read seq "
                    f"{self.seq}: the room was truncated or replaced; restart `bullpen web`"
                )
                self._notify({"kind": "status"})
                await asyncio.sleep(5)
                continue
            for raw, line in lines:
                self._take(raw, line)
            self.seq = max(self.seq, last)
            self.head = max(self.head, last)
            if lines:
                self._notify({"kind": "status"})
            if not lines or len(lines) < PAGE:
                self.caught_up.set()

    def _take(self, raw: bytes, line: dict[str, Any]) -> None:
        seq = int(line.get("seq", 0))
        if seq <= self.seq:
            return
        self.chain.check(raw, line)
        if not self.raw:
            self.first_seq = seq
        self.raw.append(raw)
        if len(self.raw) > self.keep + self.keep // 10:
            cut = len(self.raw) - self.keep
            del self.raw[:cut]
            self.first_seq += cut
        self.seq = seq
        thread = line.get("thread")
        if thread:
            self.threads.setdefault(str(thread), []).append(line)
        self.last_from[str(line.get("from"))] = {
            "seq": seq,
            "ts": line.get("ts"),
            "type": line.get("type"),
        }
        data = line.get("data")
        if isinstance(data, dict) and isinstance(data.get("seat"), str):
            self.seats[str(line.get("from"))] = data["seat"]
        for listener in self._listeners:
            listener(line)
        self._notify({"kind": "line", "raw": raw, "line": line})

    # -- fanning out -----------------------------------------------------------------

    def _notify(self, item: dict[str, Any]) -> None:
        for queue in self._subscribers:
            queue.put_nowait(item)

    def subscribe(self) -> asyncio.Queue[dict[str, Any] | None]:
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
        self._subscribers.discard(queue)

    def on_line(self, listener: Callable[[dict[str, Any]], None]) -> None:
        self._listeners.append(listener)

    # -- what a page asks for --------------------------------------------------------

    def status(self) -> dict[str, Any]:
        chain = self.chain
        return {
            "connected": self.connected,
            "caught_up": self.caught_up.is_set(),
            "seq": self.seq,
            "head": self.head,
            "audited": chain.audited,
            "broken": (
                {"seq": chain.broken_seq, "reason": chain.broken_reason}
                if chain.broken_seq is not None
                else None
            ),
            "problem": self.problem,
            "checkpoint": self.extra_status() if self.extra_status is not None else None,
        }

    def newest(self, count: int, flt: LineFilter) -> list[bytes]:
        """The last `count` lines that match, oldest first, from memory."""
        return self._scan(len(self.raw) - 1, count, flt)

    def _scan(self, start: int, count: int, flt: LineFilter) -> list[bytes]:
        found: list[bytes] = []
        index = start
        everything = flt == LineFilter()
        while index >= 0 and len(found) < count:
            raw = self.raw[index]
            if everything or flt.matches(json.loads(raw)):
                found.append(raw)
            index -= 1
        found.reverse()
        return found

    def after(self, seq: int, flt: LineFilter) -> list[bytes]:
        """Every line in memory after `seq` that matches (a stream resuming)."""
        start = max(0, seq + 1 - self.first_seq)
        return [raw for raw in self.raw[start:] if flt.matches(json.loads(raw))]

    async def before(self, seq: int, count: int, flt: LineFilter) -> list[bytes]:
        """Up to `count` matching lines before `seq`, oldest first: from memory, then the hub."""
        index = min(len(self.raw), seq - self.first_seq) - 1
        found = self._scan(index, count, flt) if index >= 0 else []
        low = min(seq, self.first_seq)
        while len(found) < count and low > 1:
            start = max(0, low - 1 - PAGE)
            lines, _ = await self.read(start, low - 1 - start)
            older = [raw for raw, line in lines if flt.matches(line)]
            found = older[max(0, len(older) - (count - len(found))) :] + found
            low = start + 1
        return found

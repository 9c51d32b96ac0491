"""POST /say: the hub's hot path, without a framework's objects.

Every post the room stores comes through here. Two ways in, one set of
checks: the listener's protocol hands a POST /say straight to `DirectSay`
below the ASGI stack (room/direct.py: no task, no ASGI messages, the answer
in one write, the log's callback instead of a future), and `serve_say` takes
it as plain ASGI wherever that is not used (an app wrapped by another, a
percent-encoded path). What both do is exactly what the routed endpoints
do: the relaxed listener's token first, the query string screened for
secrets, the body bounded, then the gate, the limits, the log and the tree;
any failure becomes the same JSON answer (the listener's `on_error`), with
the same status, headers and bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Protocol
from urllib.parse import unquote_to_bytes

from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from room.direct import MAX_REQUEST_BYTES, stored_headers, too_big
from room.limits import Limits
from room.log import Draft, RoomLog, Stored
from room.message import PostRequest, parse_request
from room.tlog import TransparencyLog
from trust.gate import Gate


class Hub(Protocol):
    """What a post goes through: room/hub.py's Hub, which both listeners share."""

    gate: Gate
    log: RoomLog
    limits: Limits | None
    tlog: TransparencyLog | None


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of a (lowercase) header, as latin-1 text the way starlette reads it."""
    return header_in(scope["headers"], name)


def header_in(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def refuse_query_secrets(gate: Gate, query: bytes) -> None:
    """A secret in the query string is refused as sent and as the hub reads it (decoded)."""
    gate.refuse_secrets(query)
    if b"%" in query:
        gate.refuse_secrets(unquote_to_bytes(query))


def before_body(
    hub: Hub, relaxed: bool, headers: Iterable[tuple[bytes, bytes]], query: bytes
) -> None:
    """What is refused before a byte of the body is read: no token (relaxed), a secret in the
    query string, a room that stopped for good, a declared length over the bound."""
    gate = hub.gate
    if relaxed:  # the token first: without it, not even the body is read
        gate.check_bearer(header_in(headers, b"authorization"))
    if query:
        refuse_query_secrets(gate, query)
    failed = hub.log.failed
    if failed is not None:  # stopping for good: refuse before the gate spends a nonce
        raise failed
    declared = header_in(headers, b"content-length") or ""
    if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
        raise too_big()


async def read_body(receive: Receive) -> bytes:
    """The whole request body, at most MAX_REQUEST_BYTES (else 413, unread past the bound)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise too_big()
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def admitted(hub: Hub, relaxed: bool, request: PostRequest, size: int, verified: bool) -> Draft:
    """The draft of a post the gate judged: each poster bounded, then how it was admitted."""
    if hub.limits is not None:  # verified or not, each poster is bounded (room/limits.py)
        admit = hub.limits.admit_verified if verified else hub.limits.admit_unverified
        admit(request.post.from_, size)
    via = hub.gate.admitted_via(request, relaxed, verified)
    proof = request.proof
    nonce = None if proof is None else proof.nonce  # kept in the line: the room remembers it
    return Draft(request.post, verified, via, nonce)


def needs_cover(hub: Hub, draft: Draft) -> bool:
    """A keyed nick's proofless line: only the hub's signed word vouches for it, before the
    answer (room/tlog.py)."""
    return (
        hub.tlog is not None
        and draft.via is not None
        and draft.post.from_ in hub.gate.table.public_keys
    )


async def store(hub: Hub, draft: Draft) -> bytes:
    """Append the draft, cover it with a signed checkpoint when it needs one; its line."""
    stored = await hub.log.append(draft)
    if hub.tlog is not None and needs_cover(hub, draft):
        await hub.tlog.cover(stored.seq)
    return stored.raw


async def say(hub: Hub, relaxed: bool, scope: Scope, receive: Receive) -> bytes:
    """Admit, store and return one post's line; raise what the listener turns into 4xx/5xx."""
    before_body(hub, relaxed, scope["headers"], scope["query_string"])
    raw = await read_body(receive)
    request = parse_request(raw, screen=hub.gate.refuse_secrets)
    verified = await hub.gate.admit(request, relaxed)
    return await store(hub, admitted(hub, relaxed, request, len(raw), verified))


async def serve_say(
    hub: Hub,
    relaxed: bool,
    scope: Scope,
    receive: Receive,
    send: Send,
    on_error: Callable[[str, Exception], Response],
    on_hangup: Callable[[str], None],
) -> None:
    """One POST /say, answered: the stored line (200) or the listener's error answer."""
    try:
        line = await say(hub, relaxed, scope, receive)
    except ClientDisconnect:  # nobody to answer
        on_hangup(scope["path"])
        return
    except Exception as exc:  # every failure becomes a JSON answer
        await on_error(scope["path"], exc)(scope, receive, send)
        return
    await send({"type": "http.response.start", "status": 200, "headers": stored_headers(line)})
    await send({"type": "http.response.body", "body": line})


class DirectSay:
    """The hub's side of a POST /say its listener's protocol reads itself (room/direct.py).

    The post is parsed, judged and bounded as soon as its body is whole, and
    handed to the log with a callback that writes the answer: no task and no
    future per post. Where the path must wait on something else (a nonce
    store shared by several hubs, a checkpoint the answer waits for) the rest
    runs as a task, as on the ASGI path.
    """

    def __init__(
        self,
        hub: Hub,
        relaxed: bool,
        on_error: Callable[[str, Exception], Response],
        on_hangup: Callable[[str], None],
    ) -> None:
        self.hub = hub
        self.relaxed = relaxed
        self._on_error = on_error
        self._on_hangup = on_hangup
        self._tasks: set[asyncio.Task[None]] = set()

    def head(self, headers: Iterable[tuple[bytes, bytes]], query: bytes) -> None:
        before_body(self.hub, self.relaxed, headers, query)

    def body(self, raw: bytes, answer: Answer) -> None:
        """Judge a whole body and store it; `answer` is called once, now or when it is stored."""
        hub = self.hub
        request = parse_request(raw, screen=hub.gate.refuse_secrets)
        if not hub.gate.judges_at_once:  # a shared nonce store: a round trip to await
            self._finish(self._admit_and_store(request, len(raw)), answer)
            return
        verified = hub.gate.judge(request, self.relaxed)
        draft = admitted(hub, self.relaxed, request, len(raw), verified)
        if needs_cover(hub, draft):
            self._finish(store(hub, draft), answer)
            return
        hub.log.submit(draft, answer.stored)

    async def _admit_and_store(self, request: PostRequest, size: int) -> bytes:
        verified = await self.hub.gate.admit(request, self.relaxed)
        return await store(self.hub, admitted(self.hub, self.relaxed, request, size, verified))

    def _finish(self, storing: Coroutine[Any, Any, bytes], answer: Answer) -> None:
        async def run() -> None:
            try:
                line = await storing
            except Exception as exc:
                answer.failed(exc)
                return
            answer.line(line)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def error(self, exc: Exception) -> Response:
        return self._on_error("/say", exc)

    def hung_up(self) -> None:
        self._on_hangup("/say")


class Answer(Protocol):
    """How DirectSay answers one request (room/direct.py's Exchange)."""

    def line(self, line: bytes) -> None: ...

    def failed(self, exc: Exception) -> None: ...

    def stored(self, result: Stored | BaseException) -> None: ...

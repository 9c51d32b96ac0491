"""POST /say as plain ASGI: the hub's hot path, without a framework's objects.

Every post the room stores comes through here, so the path reads the body
straight off `receive`, answers with two `send` calls, and builds no
Request, Headers or Response object on the way (they cost more per post than
the rest of the answer: docs/performance.md, the post path stage by stage).
What it does is exactly what the routed endpoints do: the relaxed listener's
token first, the query string screened for secrets, the body bounded, then
the gate, the limits, the log and the tree; any failure becomes the same
JSON answer (the listener's `on_error`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol
from urllib.parse import unquote_to_bytes

from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from room.errors import BadPost
from room.limits import Limits
from room.log import Draft, RoomLog
from room.message import parse_request
from room.tlog import TransparencyLog
from trust.gate import Gate

MAX_REQUEST_BYTES = 2 * 1024 * 1024
_JSON = (b"content-type", b"application/json")


class Hub(Protocol):
    """What a post goes through: room/hub.py's Hub, which both listeners share."""

    gate: Gate
    log: RoomLog
    limits: Limits | None
    tlog: TransparencyLog | None


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of a (lowercase) header, as latin-1 text the way starlette reads it."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def refuse_query_secrets(gate: Gate, query: bytes) -> None:
    """A secret in the query string is refused as sent and as the hub reads it (decoded)."""
    gate.refuse_secrets(query)
    if b"%" in query:
        gate.refuse_secrets(unquote_to_bytes(query))


def _too_big() -> BadPost:
    return BadPost(
        f"the request is over {MAX_REQUEST_BYTES // (1024 * 1024)} MiB; a post's body may be "
        "64 KiB and its data 256 KiB",
        status=413,
    )


async def read_body(scope: Scope, receive: Receive) -> bytes:
    """The whole request body, at most MAX_REQUEST_BYTES (else 413, unread past the bound)."""
    declared = header(scope, b"content-length") or ""
    if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
        raise _too_big()
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise _too_big()
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def say(hub: Hub, relaxed: bool, scope: Scope, receive: Receive) -> bytes:
    """Admit, store and return one post's line; raise what the listener turns into 4xx/5xx."""
    gate = hub.gate
    if relaxed:  # the token first: without it, not even the body is read
        gate.check_bearer(header(scope, b"authorization"))
    if scope["query_string"]:
        refuse_query_secrets(gate, scope["query_string"])
    failed = hub.log.failed
    if failed is not None:  # stopping for good: refuse before the gate spends a nonce
        raise failed
    raw = await read_body(scope, receive)
    post_request = parse_request(raw, screen=gate.refuse_secrets)
    verified = await gate.admit(post_request, relaxed)
    if hub.limits is not None:  # verified or not, each poster is bounded (room/limits.py)
        admit = hub.limits.admit_verified if verified else hub.limits.admit_unverified
        admit(post_request.post.from_, len(raw))
    via = gate.admitted_via(post_request, relaxed, verified)
    proof = post_request.proof
    nonce = None if proof is None else proof.nonce  # kept in the line: the room remembers it
    stored = await hub.log.append(Draft(post_request.post, verified, via, nonce))
    tlog = hub.tlog
    if tlog is not None and via is not None and stored.sender in gate.table.public_keys:
        await tlog.cover(stored.seq)  # only the hub's signed word vouches for such a line
    return stored.raw


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
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(line)).encode()), _JSON],
        }
    )
    await send({"type": "http.response.body", "body": line})

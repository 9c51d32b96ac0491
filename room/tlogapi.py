"""The hub's transparency-log endpoints (docs/audit.md), for readers with the read token.

    GET  /tlog/checkpoint                     the latest signed note, with cosignatures
    GET  /tlog/proof/inclusion?seq=N&size=S   RFC 9162 §2.1.3 proof of line N in tree S
    GET  /tlog/proof/consistency?from=A&to=B  RFC 9162 §2.1.4 proof that tree B extends A
    POST /tlog/cosign                         a witness's cosignature of the current note

Proofs answer `{"proof": ["<base64 hash>", …]}`; `size` and `to` default to
the latest signed checkpoint's size. A size beyond the tree, a seq outside
it or from > to is a 400 saying what to ask instead.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from room.errors import BadRequest
from room.params import int_param
from room.tlog import TransparencyLog

MAX_SIZE = 10**15
MAX_COSIGN_BYTES = 64 * 1024

Endpoint = Callable[[Request], Awaitable[Response]]


def _only(request: Request, allowed: set[str]) -> None:
    for name in request.query_params:
        if name not in allowed:
            raise BadRequest(
                f"unknown parameter {name[:40]!r}; this endpoint takes {', '.join(sorted(allowed))}"
            )


def _refused(message: str, status: int) -> BadRequest:
    exc = BadRequest(message)
    exc.status = status
    return exc


async def _bounded_body(request: Request) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_COSIGN_BYTES:
            raise _refused("a cosignature request is a few hundred bytes, not over 64 KiB", 413)
        chunks.append(chunk)
    return b"".join(chunks)


def _proof(hashes: list[bytes]) -> Response:
    return JSONResponse({"proof": [base64.b64encode(h).decode() for h in hashes]})


class TlogEndpoints:
    """The routes, bound to one hub's transparency log."""

    def __init__(self, tlog: TransparencyLog) -> None:
        self.tlog = tlog

    def routes(self) -> dict[str, tuple[str, Endpoint]]:
        return {
            "/tlog/checkpoint": ("GET", self.checkpoint),
            "/tlog/proof/inclusion": ("GET", self.inclusion),
            "/tlog/proof/consistency": ("GET", self.consistency),
            "/tlog/cosign": ("POST", self.cosign),
        }

    def _size(self, request: Request, name: str) -> int:
        size = int_param(request, name, self.tlog.signed_size, 0, MAX_SIZE)
        if size > self.tlog.tree.size:
            raise BadRequest(
                f"{name}={size} is beyond the tree, which holds {self.tlog.tree.size} lines; "
                "ask for the size of a checkpoint you hold (GET /tlog/checkpoint)"
            )
        return size

    async def checkpoint(self, request: Request) -> Response:
        _only(request, set())
        if self.tlog.note is None:
            await self.tlog.sign()
        return PlainTextResponse(self.tlog.served(), media_type="text/plain; charset=utf-8")

    async def inclusion(self, request: Request) -> Response:
        _only(request, {"seq", "size"})
        if "seq" not in request.query_params:
            raise BadRequest("seq is required: the line whose inclusion to prove")
        size = self._size(request, "size")
        seq = int_param(request, "seq", 0, 1, MAX_SIZE)
        if seq > size:
            raise BadRequest(f"seq {seq} is not in a tree of {size} lines; ask with size >= {seq}")
        return _proof(self.tlog.tree.inclusion(seq - 1, size))

    async def consistency(self, request: Request) -> Response:
        _only(request, {"from", "to"})
        if "from" not in request.query_params:
            raise BadRequest("from is required: the size of the older checkpoint")
        new = self._size(request, "to")
        old = int_param(request, "from", 0, 0, MAX_SIZE)
        if old > new:
            raise BadRequest(f"from={old} is larger than to={new}: a tree cannot shrink")
        return _proof(self.tlog.tree.consistency(old, new))

    async def cosign(self, request: Request) -> Response:
        _only(request, set())
        raw = await _bounded_body(request)
        try:
            body = json.loads(raw)
            text, key = body["checkpoint"], body["witness_key"]
            if not isinstance(text, str) or not isinstance(key, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise BadRequest(
                'send {"checkpoint": "<the note with your cosignature line>", '
                '"witness_key": "<your verifier key>"}'
            ) from None
        held = self.tlog.add_cosignature(text, key)
        return JSONResponse({"ok": True, "cosignatures": held})

"""What the JetStream tests share: signed posts, reading the room back, asking NATS directly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import nats
from nats.aio.client import Client as NATS
from nats.js.client import JetStreamContext

from room.message import Post
from tests.support import Society
from trust.proof import SecretSigner

T = TypeVar("T")


def post(
    society: Society, to: str, body: str, *, kind: str = "ask", data: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A post by the operator, proved with the home's shared secret; the stored line."""
    payload: dict[str, Any] = {"from": "operator", "to": to, "type": kind, "body": body}
    if data is not None:
        payload["data"] = data
    payload.update(SecretSigner(society.secret()).prove(Post.model_validate(payload)))
    answer = httpx.post(f"{society.strict_url}/say", content=json.dumps(payload), timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def read(society: Society, **params: Any) -> list[dict[str, Any]]:
    """Every matching line, read through the hub."""
    found: list[dict[str, Any]] = []
    after = 0
    while True:
        answer = httpx.get(
            f"{society.strict_url}/read", params={**params, "after": after, "limit": 1000}
        ).json()
        found += answer["messages"]
        if len(answer["messages"]) < 1000:
            return found
        after = answer["last_seq"]


def with_js(servers: list[str], action: Callable[[JetStreamContext], Awaitable[T]]) -> T:
    """Run one JetStream call against the test servers, from a synchronous test."""

    async def run() -> T:
        nc: NATS = await nats.connect(servers=servers, connect_timeout=5)
        try:
            return await action(nc.jetstream(timeout=10))
        finally:
            await nc.close()

    return asyncio.run(run())

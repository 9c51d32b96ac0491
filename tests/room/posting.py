"""Posts for the gate's tests: plain, bearer-token and shared-secret-signed, over HTTP."""

from __future__ import annotations

import json
from typing import Any

import httpx

from room.message import Post
from tests.support import HTTP, Society
from trust.proof import SecretSigner


def post(
    url: str, payload: Any, token: str | None = None, raw: bytes | None = None
) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    content = raw if raw is not None else json.dumps(payload).encode()
    return HTTP.post(f"{url}/say", content=content, headers=headers, timeout=10)


def fields(sender: str = "operator", body: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"from": sender, "to": "@echo", "type": "ask", "body": body, **extra}


def signed(
    secret: bytes, sender: str = "operator", body: str = "hello", **extra: Any
) -> dict[str, Any]:
    payload = fields(sender, body, **extra)
    payload.update(SecretSigner(secret).prove(Post.model_validate(payload)))
    return payload


def count(society: Society) -> int:
    return len(society.lines())

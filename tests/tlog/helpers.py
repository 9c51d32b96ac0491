"""Shared by the tlog tests: fill a real hub's room, fetch its checkpoint and proofs."""

from __future__ import annotations

import base64
from typing import Any

import httpx

from tests.support import HTTP, Society, set_hub, wait_for
from trust import note


def prepare(society: Society) -> None:
    """A home whose hub signs often and lets one test nick post thousands of lines."""
    set_hub(
        society.root,
        checkpoint_interval_s=0.3,
        unverified_nick_posts_per_s=0,
        unverified_nick_bytes_per_s=0,
        unverified_total_posts_per_s=0,
        unverified_total_bytes_per_s=0,
    )


def fill(society: Society, count: int, start: int = 0) -> None:
    """Post `count` unverified lines through the strict listener, one connection."""
    with httpx.Client(base_url=society.strict_url, timeout=30) as client:
        for i in range(start, start + count):
            body = {"from": "visitor", "to": "@echo", "type": "chat", "body": f"line {i} ✓"}
            answer = client.post("/say", json=body)
            assert answer.status_code == 200, answer.text


def checkpoint(society: Society) -> str:
    answer = HTTP.get(
        f"{society.strict_url}/tlog/checkpoint", headers=society.read_headers(), timeout=10
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return answer.text


def checkpoint_of(society: Society, size: int, timeout: float = 30) -> str:
    """The hub's checkpoint once it covers `size` lines (the hub signs on its interval)."""

    def ready() -> str | None:
        text = checkpoint(society)
        return text if note.parse(text).head().size >= size else None

    return str(wait_for(ready, timeout, f"a checkpoint of {size} lines"))


def proof(society: Society, path: str, **params: Any) -> list[bytes]:
    answer = HTTP.get(
        f"{society.strict_url}/tlog/proof/{path}",
        params=params,
        headers=society.read_headers(),
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return [base64.b64decode(h) for h in answer.json()["proof"]]


def get(society: Society, path: str, **params: Any) -> httpx.Response:
    return HTTP.get(
        f"{society.strict_url}{path}", params=params, headers=society.read_headers(), timeout=10
    )

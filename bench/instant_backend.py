"""An instant OpenAI-compatible backend for bench/gateway.py: a fixed answer, no model.

    python bench/instant_backend.py PORT

Raw ASGI on uvicorn with httptools, so the backend's own cost stays small
next to the gateway's: the benchmark compares calls through the gateway
with calls straight to this same server.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import uvicorn

ANSWER = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "model": "bench",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
).encode()


def _chunk(content: str, finish: str | None) -> bytes:
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "model": "bench",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


STREAM = [_chunk("o", None), _chunk("k", None), _chunk("!", "stop"), b"data: [DONE]\n\n"]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    stream = b'"stream":true' in body.replace(b" ", b"")
    if stream:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for piece in STREAM:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(ANSWER)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": ANSWER})


if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="warning",
        access_log=False,
        http="httptools",
        loop="uvloop",
    )

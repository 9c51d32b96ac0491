"""A chat-completions request body, read the strict way: every bad body is a 400 saying why.

The body is hostile input like any other: it may be huge, nested a
thousand deep (`[[[[...`), not JSON, not UTF-8, or JSON whose fields the
gateway reads (`model`, `messages`, `stream`, `n`, `stop`, `max_tokens`,
`stream_options`) have the wrong types. Each of those is refused here,
before routing or budgets, with a sentence naming the field and what to
send — never a traceback or a 500. It is parsed by room/strictjson.py (no
NaN, no duplicate keys, at most 32 levels deep); any other field passes to
the backend untouched (`response_format`, `tools`, ...).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from room import strictjson
from room.errors import BullpenError

__all__ = ["MAX_BODY", "MAX_CHOICES", "BadRequest", "read_body"]

MAX_BODY = 8 * 1024 * 1024
MAX_CHOICES = 128  # OpenAI's own bound on `n`
MAX_STOPS = 16


class BadRequest(BullpenError):
    """The request body cannot be used (400); the message names what to fix."""

    code = "bad_request"
    status = 400


class TooLarge(BadRequest):
    code = "body_too_large"
    status = 413


async def read_body(request: Request) -> dict[str, Any]:
    """The request's JSON object, its fields checked; BadRequest saying what was wrong."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise TooLarge(f"the request body is over {MAX_BODY} bytes; send a shorter prompt")
    pieces: list[bytes] = []
    size = 0
    async for piece in request.stream():
        size += len(piece)
        if size > MAX_BODY:
            raise TooLarge(f"the request body is over {MAX_BODY} bytes; send a shorter prompt")
        pieces.append(piece)
    try:
        body = strictjson.loads(b"".join(pieces))
    except strictjson.JsonRejected as exc:
        raise BadRequest(
            f"the request body is not usable JSON ({exc}); send a chat-completions object "
            "with model and messages"
        ) from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object with model and messages")
    check_fields(body)
    return body


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_fields(body: dict[str, Any]) -> None:
    """The fields the gateway itself reads have the types the OpenAI API gives them."""
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest('"model" must be a string, e.g. "qwen2.5-7b"')
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise BadRequest(
            '"messages" must be a list of objects like {"role": "user", "content": "hi"}'
        )
    for message in messages:
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            raise BadRequest('a message\'s "content" must be a string or a list of parts')
    if "stream" in body and not isinstance(body["stream"], bool):
        raise BadRequest('"stream" must be true or false')
    n = body.get("n")
    if n is not None and (not _int(n) or not 1 <= n <= MAX_CHOICES):
        raise BadRequest(f'"n" must be a whole number from 1 to {MAX_CHOICES}')
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str):
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise BadRequest('"stop" must be a string or a list of strings')
        if len(stop) > MAX_STOPS:
            raise BadRequest(f'"stop" may hold at most {MAX_STOPS} strings')
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if value is not None and (not _int(value) or value < 1):
            raise BadRequest(f'"{key}" must be a whole number of at least 1')
    options = body.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise BadRequest('"stream_options" must be an object like {"include_usage": true}')
        if not isinstance(options.get("include_usage", False), bool):
            raise BadRequest('"stream_options.include_usage" must be true or false')

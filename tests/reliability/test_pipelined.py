"""A pipelined request: a good post and then garbage on one connection (issue 23).

The hub used to store the post and answer only the garbage's 400: the
response to the post was dropped when the connection was closed for the
garbage, so the poster could not know its line had landed. Now every request
the hub parsed whole is answered, in order, before the 400 for what follows.
"""

from __future__ import annotations

import json
import re
import socket
import time

import pytest

from tests.reliability.helpers import http_request
from tests.support import Society

GARBAGE = [
    b"\x00\x01\x02 not http at all\r\n\r\n",
    b"GARBAGE /say HTTP/9.9\r\n\r\n",
    b"POST /say HTTP/1.1\r\ncontent-length: nope\r\n\r\n",
]


def _post(body: str) -> bytes:
    payload = {"from": "piper", "to": "@all", "type": "chat", "body": body}
    return http_request("POST", "/say", json.dumps(payload).encode())


def _answers(port: int, data: bytes, timeout: float = 15.0) -> bytes:
    """Send `data` at once on one connection; everything the hub writes until it closes."""
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(data)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = conn.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            got += chunk
    return got


def _statuses(stream: bytes) -> list[int]:
    """The status of each response in the stream, in order (a body does not end in CRLF)."""
    return [int(status) for status in re.findall(rb"HTTP/1\.1 (\d{3}) ", stream)]


@pytest.mark.parametrize("garbage", GARBAGE, ids=["binary", "bad-method", "bad-length"])
def test_a_post_followed_by_garbage_is_answered_before_the_400(
    society: Society, garbage: bytes
) -> None:
    """Post + garbage in one write: if the line is in the room, the stream holds its 200
    (with the stored line) before the 400; and the hub goes on serving."""
    society.start_hub()
    body = f"pipelined {garbage[:6]!r}"
    stream = _answers(society.strict_port, _post(body) + garbage)
    stored = [line for line in society.lines() if line["body"] == body]
    statuses = _statuses(stream)
    assert stored, f"the post was not stored; answers {stream[:400]!r}"
    assert statuses[:1] == [200], f"the post landed but its answer is missing: {stream[:300]!r}"
    assert f'"seq":{stored[0]["seq"]}'.encode() in stream
    assert statuses[1:] == [400], stream[:600]
    assert society.healthy()


def test_two_posts_then_garbage_are_both_answered_in_order(society: Society) -> None:
    """Two good posts pipelined before the garbage: two 200s in order, then the 400."""
    society.start_hub()
    stream = _answers(
        society.strict_port, _post("first of two") + _post("second of two") + GARBAGE[0]
    )
    bodies = [line["body"] for line in society.lines()]
    assert bodies[-2:] == ["first of two", "second of two"]
    assert _statuses(stream) == [200, 200, 400], stream[:900]
    assert stream.index(b"first of two") < stream.index(b"second of two")


def test_garbage_inside_a_chunked_body_stores_that_post_not(society: Society) -> None:
    """A good post, then a chunked post whose body breaks off into garbage: the first is
    answered 200 and stored; the second was never whole: 400, nothing stored for it."""
    society.start_hub()
    payload = json.dumps({"from": "piper", "to": "@all", "type": "chat", "body": "half"}).encode()
    head = (
        b"POST /say HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    broken = head + b"%x\r\n" % len(payload) + payload + b"\r\nzz-not-a-chunk-size\r\n\r\n"
    stream = _answers(society.strict_port, _post("whole before the break") + broken)
    assert _statuses(stream) == [200, 400], stream[:600]
    bodies = [line["body"] for line in society.lines()]
    assert "whole before the break" in bodies and "half" not in bodies
    assert society.healthy()

"""A request the listener's protocol serves itself, below the ASGI stack: the hub's POST /say.

uvicorn hands every request to the app as a task, with ASGI messages both
ways, and writes an answer's head and body in two writes. For the post path
that machinery cost more CPU than the whole post (docs/performance.md), so
the connection guard's protocol (room/guard.py) gives a POST /say to the
app's direct handler (room/say.py's DirectSay) as an `Exchange` instead:
the body is gathered as the parser reads it, the handler is called once it
is whole, and the answer goes out in one write with the very headers
uvicorn would have sent (its default headers, `connection: close` when the
connection ends).

An Exchange stands where uvicorn keeps its request cycle, with the fields
the protocol and the guard look at (`response_started`, `response_complete`,
`more_body`, `disconnected`, `keep_alive`), so keep-alive, pipelined
requests answered in order, the guard's timeouts and a graceful shutdown
work as for any other request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from room.errors import BadPost

if TYPE_CHECKING:
    from starlette.responses import Response
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_REQUEST_BYTES = 2 * 1024 * 1024
_JSON = (b"content-type", b"application/json")


def too_big() -> BadPost:
    return BadPost(
        f"the request is over {MAX_REQUEST_BYTES // (1024 * 1024)} MiB; a post's body may be "
        "64 KiB and its data 256 KiB",
        status=413,
    )


def stored_headers(line: bytes) -> list[tuple[bytes, bytes]]:
    """The 200 answer's headers: the stored line is the body."""
    return [(b"content-length", str(len(line)).encode()), _JSON]


class Handler(Protocol):
    """What an app offers for the requests it takes directly (room/say.py's DirectSay)."""

    def head(self, headers: list[tuple[bytes, bytes]], query: bytes) -> None: ...

    def body(self, raw: bytes, answer: Exchange) -> None: ...

    def error(self, exc: Exception) -> Response: ...

    def hung_up(self) -> None: ...


class _NoEvent:
    """uvicorn sets its cycle's message event on a lost connection; nothing waits on ours."""

    def set(self) -> None:
        return None


class Exchange:
    """One request served directly, from its head to its one-write answer."""

    message_event = _NoEvent()

    def __init__(
        self,
        protocol: HttpToolsProtocol,
        handler: Handler,
        headers: list[tuple[bytes, bytes]],
        query: bytes,
        keep_alive: bool,
        expect_continue: bool,
    ) -> None:
        self.protocol = protocol
        self.handler = handler
        self.headers = headers
        self.query = query
        self.keep_alive = keep_alive
        self.expect_continue = expect_continue
        self.body = bytearray()
        self.more_body = True  # until the parser has the whole body
        self.response_started = False
        self.response_complete = False
        self.disconnected = False
        self.turn = False  # every request before it on the connection is answered

    def take_turn(self) -> None:
        """Its turn to be served: the checks before the body, then the body if it is whole."""
        self.turn = True
        try:
            self.handler.head(self.headers, self.query)
            if len(self.body) > MAX_REQUEST_BYTES:
                raise too_big()
        except Exception as exc:
            self.failed(exc)
            return
        if self.expect_continue and not self.protocol.transport.is_closing():
            # As uvicorn's receive() does on the ASGI path's first read of the body.
            self.protocol.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if not self.more_body:
            self._serve()

    def feed(self, chunk: bytes) -> None:
        if self.response_complete:
            return  # answered already (a refusal): the rest is read and dropped
        self.body += chunk
        if self.turn and len(self.body) > MAX_REQUEST_BYTES:
            self.failed(too_big())

    def whole(self) -> None:
        self.more_body = False
        if self.turn and not self.response_complete:
            self._serve()

    def lost(self) -> None:
        """The connection went: a request still being read is said once, as on the ASGI path."""
        self.disconnected = True
        if self.turn and self.more_body and not self.response_complete:
            self.handler.hung_up()

    def _serve(self) -> None:
        try:
            self.handler.body(bytes(self.body), self)
        except Exception as exc:
            self.failed(exc)

    # The handler's answers (room/say.py's Answer).

    def line(self, line: bytes) -> None:
        self.send(200, stored_headers(line), line)

    def stored(self, result: Any) -> None:
        """The log's callback: a room/log.py Stored, or why the post was not stored."""
        if isinstance(result, Exception):
            self.failed(result)
        elif isinstance(result, BaseException):
            raise result
        else:
            self.line(result.raw)

    def failed(self, exc: Exception) -> None:
        response = self.handler.error(exc)
        self.send(response.status_code, response.raw_headers, bytes(response.body))

    def send(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """The whole answer in one write, as uvicorn would have framed it."""
        if self.response_complete:
            return
        self.response_started = self.response_complete = True
        protocol = self.protocol
        if self.disconnected or protocol.transport.is_closing():
            return  # nobody to answer (uvicorn's send does the same)
        content = [STATUS_LINE[status]]
        for name, value in (*protocol.server_state.default_headers, *headers):
            content += (name, b": ", value, b"\r\n")
        if not self.keep_alive:
            content.append(b"connection: close\r\n")
        content += (b"\r\n", body)
        protocol.transport.write(b"".join(content))
        if not self.keep_alive:
            protocol.transport.close()
        protocol.on_response_complete()

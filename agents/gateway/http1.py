"""A lean keep-alive HTTP/1.1 client for the gateway's calls to its backends.

httpx costs the gateway more per call than everything else it does
together, and under concurrency its pool serialises (bench/gateway.py
measured under 50 calls/s from 8 clients through it). This client does only
what the hot path needs: one POST with a JSON body over a pooled
connection (plain or TLS), the response parsed by httptools (the parser
uvicorn uses), its body read whole or line by line for server-sent events.
A pooled connection the server has closed meanwhile is retried once on a
fresh one, before any byte of an answer was read.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httptools

__all__ = ["Pool", "UpstreamResponse"]

_READ = 65536
MAX_LINE = 4 * 1024 * 1024  # one server-sent event line; a backend's endless line is cut off


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def close(self) -> None:
        self.writer.close()


class UpstreamResponse:
    """A response whose head has arrived; read its body with `read()` or `lines()`."""

    def __init__(self, pool: Pool, key: tuple[str, int, bool], conn: _Conn) -> None:
        self._pool, self._key, self._conn = pool, key, conn
        self.status_code = 0
        self.headers: dict[str, str] = {}
        self._pieces: list[bytes] = []
        self._header: bytes = b""
        self._head_done = False
        self._keep_alive = False
        self._complete = False
        self._closed = False
        self._parser = httptools.HttpResponseParser(self)

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status_code = self._parser.get_status_code()
        self._keep_alive = self._parser.should_keep_alive()  # not to be asked after the body
        self._head_done = True

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)

    def on_message_complete(self) -> None:
        self._complete = True

    async def _feed(self, deadline: float | None = None) -> bool:
        """Read once from the connection; False at EOF; TimeoutError past `deadline`."""
        if deadline is None:
            data = await self._conn.reader.read(_READ)
        else:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            data = await asyncio.wait_for(self._conn.reader.read(_READ), left)
        if not data:  # EOF: a close-delimited body (no length, not chunked) ends here
            return False
        self._parser.feed_data(data)
        return True

    async def _head(self) -> None:
        while not self._head_done:
            if not await self._feed():
                raise ConnectionResetError("the backend closed the connection before answering")

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    async def chunks(self, deadline: float | None = None) -> AsyncIterator[bytes]:
        """The body as it arrives; TimeoutError once `deadline` (time.monotonic) has passed."""
        while True:
            if self._pieces:
                pieces, self._pieces = self._pieces, []
                for piece in pieces:
                    yield piece
            if self._complete:
                return
            if not await self._feed(deadline):
                if self._pieces:
                    continue
                return

    async def read(self) -> bytes:
        body = b"".join([piece async for piece in self.chunks()])
        await self.aclose()
        return body

    async def lines(self, deadline: float | None = None) -> AsyncIterator[str]:
        rest = b""
        async for piece in self.chunks(deadline):
            rest += piece
            *whole, rest = rest.split(b"\n")
            if len(rest) > MAX_LINE:
                raise ConnectionError(f"the backend sent a line of over {MAX_LINE} bytes")
            for line in whole:
                yield line.rstrip(b"\r").decode("utf-8", "replace")
        if rest:
            yield rest.decode("utf-8", "replace")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._complete and self._keep_alive:
            self._pool.release(self._key, self._conn)
        else:
            self._conn.close()


class Pool:
    """Idle keep-alive connections per (host, port, tls), up to `keep` each."""

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self._idle: dict[tuple[str, int, bool], list[_Conn]] = {}
        self._tls = ssl.create_default_context()

    def release(self, key: tuple[str, int, bool], conn: _Conn) -> None:
        idle = self._idle.setdefault(key, [])
        if len(idle) < self.keep and not conn.writer.is_closing():
            idle.append(conn)
        else:
            conn.close()

    async def _connect(self, host: str, port: int, tls: bool) -> _Conn:
        reader, writer = await asyncio.open_connection(
            host, port, ssl=self._tls if tls else None, server_hostname=host if tls else None
        )
        return _Conn(reader, writer)

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> UpstreamResponse:
        """POST `body`; the response once its status and headers have arrived."""
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if tls else 80)
        key = (host, port, tls)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        netloc = host if parts.port is None else f"{host}:{port}"
        lines = [f"POST {target} HTTP/1.1", f"Host: {netloc}", f"Content-Length: {len(body)}"]
        lines += ["Content-Type: application/json", *(f"{k}: {v}" for k, v in headers.items())]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        idle = self._idle.get(key) or []
        while idle:  # a pooled connection first; one the server closed is dropped
            conn = idle.pop()
            if conn.writer.is_closing() or conn.reader.at_eof():
                conn.close()
                continue
            response = await self._try(key, conn, request)
            if response is not None:
                return response
        conn = await self._connect(host, port, tls)
        response = await self._try(key, conn, request, fresh=True)
        assert response is not None
        return response

    async def _try(
        self, key: tuple[str, int, bool], conn: _Conn, request: bytes, fresh: bool = False
    ) -> UpstreamResponse | None:
        response = UpstreamResponse(self, key, conn)
        try:
            conn.writer.write(request)
            await conn.writer.drain()
            await response._head()
        except (ConnectionError, httptools.HttpParserError, OSError):
            conn.close()
            if fresh:
                raise
            return None  # a stale pooled connection: try another
        except BaseException:
            conn.close()
            raise
        return response

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()

"""A `/read` answer bounded in bytes, sent page by page as the reader takes it.

`limit` bounds lines, but a line can be ~700 KiB: 1,000 of them built one
answer of most of a gigabyte in the hub's memory, held as long as the reader
chose not to read it. Here an answer stops before `max_bytes` (it always
holds at least one line, so a reader never stalls on a big line), and its
`last_seq` says where the next read resumes. An answer larger than one page
is fetched from the log a page at a time, each after the page before was
handed to the transport: uvicorn waits for the socket to drain before the
next write, so a reader that stops reading holds one page and the kernel's
socket buffer, not its whole answer.
"""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

from room.log import Filter, ReadResult, RoomLog
from room.reader import seq_of

FIRST_PAGE_LINES = 8  # the first read: most answers (a lurker's) are a few lines
PAGE_BYTES = 256 * 1024  # later pages: about this many bytes each, by the lines seen so far


def _fit(lines: list[bytes], budget: int, empty: bool) -> list[bytes]:
    """The leading lines that fit in `budget` bytes (one at least when the answer is `empty`)."""
    used = 0
    for n, line in enumerate(lines):
        used += len(line) + 1
        if used > budget and not (empty and n == 0):
            return lines[:n]
    return lines


class ReadAnswer:
    """An ASGI response: `{"messages":[...],"last_seq":N}` from `first` onwards."""

    def __init__(
        self,
        log: RoomLog,
        first: ReadResult,
        page: int,
        limit: int,
        flt: Filter,
        max_bytes: int,
    ) -> None:
        self.log = log
        self.first = first
        self.page = page  # how many lines `first` was asked for
        self.limit = limit
        self.flt = flt
        self.max_bytes = max_bytes

    def _take(
        self, result: ReadResult, asked: int, sent: int, budget: int, prev: int
    ) -> tuple[list[bytes], int, bool]:
        """The lines of `result` to send, the seq they cover, and whether more may follow."""
        lines = _fit(result.lines, budget, sent == 0)
        if len(lines) < len(result.lines):  # cut short: resume after the last line sent
            return lines, seq_of(lines[-1]) if lines else prev, False
        more = len(lines) == asked and sent + len(lines) < self.limit
        return lines, result.last_seq, more

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        budget = self.max_bytes
        first, self.first = self.first, ReadResult([], 0)  # held only while it is sent
        lines, last_seq, more = self._take(first, self.page, 0, budget, 0)
        del first
        head = b'{"messages":[' + b",".join(lines)
        if not more:  # the common case: one page, one write, a Content-Length
            body = head + b'],"last_seq":' + str(last_seq).encode() + b"}"
            del head, lines
            await send(_start([(b"content-length", str(len(body)).encode())]))
            await send({"type": "http.response.body", "body": body})
            return
        await send(_start([]))  # chunked: the length is not known yet
        sent = len(lines)
        used = sum(len(line) + 1 for line in lines)
        del lines
        await send({"type": "http.response.body", "body": head, "more_body": True})
        del head
        budget -= used
        while more:
            per_line = max(1, used // max(1, sent))
            asked = max(1, min(self.limit - sent, PAGE_BYTES // per_line))
            result = await self.log.read(last_seq, asked, self.flt)
            lines, last_seq, more = self._take(result, asked, sent, budget, last_seq)
            if lines:
                chunk = b"," + b",".join(lines)
                sent += len(lines)
                used += len(chunk)
                budget -= len(chunk)
                del lines, result
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                del chunk
        tail = b'],"last_seq":' + str(last_seq).encode() + b"}"
        await send({"type": "http.response.body", "body": tail})


def _start(headers: list[tuple[bytes, bytes]]) -> dict[str, object]:
    return {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-type", b"application/json"), *headers],
    }

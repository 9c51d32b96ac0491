"""`bullpen mcp` over stdio, where a line that is not JSON-RPC gets an answer, not silence.

The SDK's stdio transport hands a line it cannot parse to the session as an exception,
which logs it and answers nothing: a client that sent garbage waits forever. Here each
such line is answered on stdout with JSON-RPC's own parse error (code -32700, id null,
as JSON-RPC 2.0 §5.1 says for a request whose id cannot be read), and everything else is
served by the SDK as before. As the SDK does, fd 0 and fd 1 are diverted while serving
(a handler's stray print goes to stderr, never onto the wire) and restored after.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterator
from io import TextIOWrapper
from typing import Any

import anyio
import mcp_types as types
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server

__all__ = ["PARSE_ERROR", "serve_stdio"]

PARSE_ERROR = -32700


def parse_error(line: str, why: Exception) -> str:
    """The JSON-RPC answer to one line that is not a JSON-RPC message."""
    reason = str(why).splitlines()[0][:200] if str(why) else type(why).__name__
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": PARSE_ERROR, "message": f"Parse error: {reason}"},
        }
    )


class _Answering:
    """The stdin the SDK reads: only lines that parse; the rest answered on `out`."""

    def __init__(self, source: Any, out: Any) -> None:
        self.source = source
        self.out = out

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self.source:
            if not line.strip():
                continue
            try:
                types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception as exc:  # the SDK's own test of a line, any failure
                await self.out.write(parse_error(line, exc) + "\n")
                await self.out.flush()
                continue
            yield line


@contextlib.contextmanager
def _diverted() -> Iterator[tuple[int, int]]:
    """(a private stdin fd, a private stdout fd); fd 0 reads /dev/null and fd 1 writes to
    stderr meanwhile, and both are put back after."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    saved_in, saved_out = os.dup(0), os.dup(1)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        yield wire_in, wire_out
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (null, saved_in, saved_out):
            os.close(fd)


async def _serve(server: MCPServer, wire_in: int, wire_out: int) -> None:
    stdin = anyio.wrap_file(
        TextIOWrapper(os.fdopen(wire_in, "rb"), encoding="utf-8", errors="replace")
    )
    stdout = anyio.wrap_file(TextIOWrapper(os.fdopen(wire_out, "wb"), encoding="utf-8"))
    answering: Any = _Answering(stdin, stdout)
    async with stdio_server(answering, stdout) as (read_stream, write_stream):
        low = server._lowlevel_server
        await low.run(read_stream, write_stream, low.create_initialization_options())


def serve_stdio(server: MCPServer) -> None:
    """Serve `server` on this process's stdin and stdout until stdin ends."""
    with _diverted() as (wire_in, wire_out):
        anyio.run(_serve, server, wire_in, wire_out)

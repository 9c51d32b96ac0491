"""`bullpen mcp --transport http`: streamable HTTP at /mcp, behind a bearer token."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.mcp.helpers import ok
from tests.support import HTTP, Society, free_port, wait_for


def answering(url: str) -> bool:
    try:
        HTTP.get(url, timeout=1)
    except httpx.HTTPError:
        return False
    return True


def test_http_transport_needs_the_token_and_then_speaks_as_the_nick(room: Society) -> None:
    """Without the token: 401 and nothing else. With it: the tools, posting as the nick, verified."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server = room.spawn(
        "mcp-http", "mcp", "--as", "operator", "--transport", "http", "--port", str(port)
    )
    try:
        wait_for(lambda: answering(url) or not server.alive(), 20, "the MCP HTTP server")
        assert server.alive(), server.output()
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "Basic x"}):
            refused = HTTP.post(url, json={}, headers=headers, timeout=5)
            assert refused.status_code == 401
            assert "Authorization: Bearer <token>" in refused.json()["message"]

        async def scenario() -> dict[str, Any]:
            token = {"authorization": f"Bearer {room.token()}"}
            async with (
                httpx2.AsyncClient(headers=token, timeout=30) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                return ok(await client.call_tool("room_say", {"to": "@echo", "body": "over http"}))

        stored = asyncio.run(scenario())
        assert stored["from"] == "operator" and stored["verified"] is True
        assert stored in room.lines()
    finally:
        server.stop()
    log = server.output()
    assert "serving the room over MCP streamable HTTP" in log
    assert room.token() not in log and room.secret().decode() not in log

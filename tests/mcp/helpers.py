"""Helpers for the MCP tests: tool results, servers as subprocesses, nicks with keys."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from agents.home import Home
from agents.mcp.server import build_server
from room.message import Post
from tests.support import HTTP, REPO, Society
from trust import keys
from trust.proof import SecretSigner

AGENT = Path(__file__).with_name("agent.py")


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def ok(result: CallToolResult) -> dict[str, Any]:
    """The structured answer of a successful call; fail the test with the tool's error if not."""
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return result.structured_content


def failed(result: CallToolResult) -> str:
    """The error text of a call that must have failed."""
    assert result.is_error, f"expected a tool error, got {result.structured_content}"
    return text(result)


@asynccontextmanager
async def in_memory(
    root: Path, nick: str, *, relaxed: bool = False, mode: str = "legacy"
) -> AsyncIterator[Client]:
    """A client connected to an in-process server through the SDK's in-memory transport.

    mode "legacy" runs the initialize handshake and JSON-RPC over the SDK's in-memory
    stream pair; "auto" uses its direct in-process dispatcher.
    """
    async with Client(build_server(Home(root), nick, relaxed=relaxed), mode=mode) as client:
        yield client


def server_args(root: Path, nick: str, *extra: str) -> list[str]:
    return ["-m", "agents.cli", "--home", str(root), "mcp", "--as", nick, *extra]


def stdio_parameters(root: Path, nick: str, *extra: str) -> StdioServerParameters:
    """`python -m agents.cli --home H mcp --as NICK` as the SDK's stdio client starts it."""
    return StdioServerParameters(
        command=sys.executable,
        args=server_args(root, nick, *extra),
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        cwd=REPO,
    )


def add_key_nick(root: Path, nick: str, *, keep_private: bool = True) -> None:
    """Make `nick` privileged with its own Ed25519 key; keep the private half here or not."""
    home = Home(root)
    if keep_private:
        key = keys.generate_private_key(home.trust.key_file(nick))
        public = keys.public_text(key)
    else:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        public = keys.public_text(Ed25519PrivateKey.generate())
    trust = root / "trust.toml"
    trust.write_text(trust.read_text().rstrip("\n") + f'\n{nick} = "{public}"\n')


def ask(society: Society, to: str, body: str, **fields: Any) -> dict[str, Any]:
    """Post a verified ask as the operator, straight to the hub."""
    payload = {"from": "operator", "to": to, "type": "ask", "body": body, **fields}
    payload.update(SecretSigner(society.secret()).prove(Post.model_validate(payload)))
    answer = HTTP.post(f"{society.strict_url}/say", json=payload, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def head(society: Society) -> int:
    return int(HTTP.get(f"{society.strict_url}/health", timeout=5).json()["seq"])

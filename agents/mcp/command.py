"""`bullpen mcp --as NICK`: serve the room's tools to an MCP client, as NICK.

stdio (the default) is what desktop and coding agents start as a
subprocess: nothing but protocol may reach stdout, so every log line of
this process goes to stderr, and while the SDK serves, file descriptor 1
itself points at stderr (a stray print cannot corrupt the protocol).

http serves MCP's streamable HTTP transport at http://HOST:PORT/mcp. It
holds the nick's proof, so it asks every request for a bearer token: by
default the home's relaxed-listener token, whose holder can already speak
as any privileged nick through the relaxed listener, so the endpoint opens
no door that was not open before.
"""

from __future__ import annotations

import argparse
import hmac
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
from mcp.server import MCPServer

from agents.home import Home
from agents.mcp.check import door_problems
from agents.mcp.server import build_server
from agents.mcp.stdio import serve_stdio
from room import logs
from room.errors import ConfigError, UsageError
from trust.secretfiles import read_secret_text

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

log = structlog.get_logger("agents.mcp.command")

MCP_PATH = "/mcp"


class BearerGate:
    """An ASGI wrapper that lets through only requests carrying the bearer token."""

    def __init__(self, app: ASGIApp, token: bytes) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = dict(scope.get("headers") or []).get(b"authorization", b"")
            scheme, _, value = header.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), self.token):
                from starlette.responses import JSONResponse

                answer = JSONResponse(
                    {
                        "error": "unauthorized",
                        "message": "this MCP endpoint needs 'Authorization: Bearer <token>' "
                        "with the token from the server's token file (by default the home's "
                        "secrets/relaxed-token)",
                    },
                    status_code=401,
                    headers={"www-authenticate": "Bearer"},
                )
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _relaxed(home: Home, nick: str, flag: bool | None) -> bool:
    if flag is not None:
        return flag
    config = home.society.nicks.get(nick)
    return bool(config and config.relaxed)


HTTP_ONLY = ("host", "port", "token_file")


def cmd_mcp(args: argparse.Namespace) -> int:
    # The CLI configured logging already; do it again so that a caller that did not
    # still gets every log line on stderr, never on stdout (the protocol's channel).
    form = getattr(args, "log_format", "auto")
    logs.configure(
        json=None if form == "auto" else form == "json", level=getattr(args, "log_level", "info")
    )
    if args.transport == "stdio":
        given = [
            f"--{n.replace('_', '-')}" for n in HTTP_ONLY if getattr(args, n, None) is not None
        ]
        if given:
            raise UsageError(
                f"{' and '.join(given)} only {'apply' if len(given) > 1 else 'applies'} to "
                "--transport http; over stdio the agent "
                "that starts this server talks to it on stdin/stdout (add --transport http to "
                "listen on a port)"
            )
    args.host = args.host or "127.0.0.1"
    args.port = 8765 if args.port is None else args.port
    home = Home.at(args.home)
    home.require()
    nick: str = args.as_nick
    relaxed = _relaxed(home, nick, args.relaxed)
    if relaxed and home.society.hub.relaxed_endpoint() is None:
        raise ConfigError(
            f"--relaxed needs a relaxed listener, and {home.society_file} has none "
            "([hub] relaxed); run without --relaxed"
        )
    server = build_server(home, nick, relaxed=relaxed)
    for problem in door_problems(home, nick, relaxed=relaxed):
        log.warning("this server cannot prove itself; the hub will refuse it", problem=problem)
    if args.transport == "stdio":
        log.info("serving the room over MCP stdio", nick=nick, relaxed=relaxed)
        serve_stdio(server)
        return 0
    return _serve_http(home, server, nick, args, relaxed)


def _serve_http(
    home: Home, server: MCPServer, nick: str, args: argparse.Namespace, relaxed: bool
) -> int:
    import anyio
    import uvicorn

    token_file = Path(args.token_file) if args.token_file else home.trust.relaxed_token_file
    if args.token_file and not token_file.exists() and not token_file.is_symlink():
        raise UsageError(
            f"--token-file {token_file} does not exist; give the path of a 0600 file holding "
            "the bearer token MCP clients must send, or leave --token-file out to use the "
            "home's relaxed token"
        )
    token = read_secret_text(token_file, "MCP endpoint token file")
    logs.register_secret(token)
    app = BearerGate(server.streamable_http_app(host=args.host), token)
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_config=None, access_log=False, lifespan="on"
    )
    log.info(
        "serving the room over MCP streamable HTTP",
        nick=nick,
        relaxed=relaxed,
        url=f"http://{args.host}:{args.port}{MCP_PATH}",
        token_file=str(token_file),
    )
    try:
        anyio.run(uvicorn.Server(config).serve)
    except KeyboardInterrupt:
        return 130
    print("bullpen mcp: stopped", file=sys.stderr)
    return 0

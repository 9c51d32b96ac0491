"""The room as MCP tools, speaking as one nick: room_say, room_read, room_thread, and shared
memory's recall and remember (agents/mcp/memory.py).

The server is a client of the hub like any other: every post goes through
the hub's gate as the server's nick, with that nick's proof when this home
holds it (its own key or the shared secret), or through the relaxed listener
with its bearer token. The server never decides who may speak: when it
cannot prove its nick, it still sends the post and hands the hub's refusal
back to the caller as a tool error, adding why it had no proof. A caller
cannot choose the nick it posts as; it is fixed when the server starts.

Tool failures (bad arguments, a refused post, an unreachable hub) are tool
errors with a message that says what to do; the server keeps serving.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import structlog
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from agents.home import Home
from room.client import RoomClient
from room.errors import BadPost, ConfigError, HubUnavailable, PostRejected
from room.logs import register_secret
from room.message import check_nick, normalize_to
from trust.proof import SecretSigner, Signer

log = structlog.get_logger("agents.mcp.server")

READ_LIMIT = 1000  # the hub's own bound on one read
# A long-poll must end before the client gives up on the call: the TypeScript MCP SDK's
# default request timeout is 60 s (the MCP Inspector's too), the hub's own bound. 50 s
# leaves room for the hub's answer to travel; a client wanting longer calls again.
MAX_WAIT_S = 50.0
THREAD_LIMIT = 5000  # lines room_thread returns at most; room_read pages past that

MessageType = Literal["ask", "chat", "ack", "reply", "system"]


@dataclass(frozen=True)
class Proof:
    """How a server speaking as a nick proves itself, and what stops it if it cannot."""

    listener: str  # "strict" or "relaxed"
    method: str  # "key", "secret", "token" or "none"
    problem: str | None = None  # why the proof this nick needs cannot be loaded


class RoomDoor:
    """One nick's way into the room: the listener it posts to and the proof it holds.

    A fresh hub client is made for every call, so a fixed secret file or a
    new key is picked up without restarting the server, and no connection
    outlives the event loop that made it.
    """

    def __init__(
        self, home: Home, nick: str, *, relaxed: bool = False, timeout: float = 10.0
    ) -> None:
        try:
            check_nick(nick, "--as")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.home = home
        self.nick = nick
        self.relaxed = relaxed
        self.timeout = timeout

    def proof(self) -> Proof:
        """What this door would prove itself with now, without contacting the hub."""
        return self._connect()[1]

    def client(self) -> tuple[RoomClient, Proof]:
        return self._connect()

    def _connect(self) -> tuple[RoomClient, Proof]:
        hub = self.home.society.hub
        if self.relaxed:
            url = hub.relaxed_endpoint()
            if url is None:
                raise ToolError(
                    "this server was started with --relaxed, but the home has no relaxed "
                    "listener ([hub] relaxed in society.toml); start it without --relaxed"
                )
            token: bytes | None = None
            problem: str | None = None
            try:
                token = self.home.relaxed_token()
            except ConfigError as exc:
                problem = exc.message
            else:
                register_secret(token)
            proof = Proof("relaxed", "token" if token else "none", problem)
            return RoomClient(url, nick=self.nick, token=token, timeout=self.timeout), proof
        trust = self.home.trust
        needed = trust.proof_of(self.nick)
        signer: Signer | None = None
        problem = None
        try:
            signer = self.home.signer_for(self.nick)
        except ConfigError as exc:
            problem = exc.message
        if isinstance(signer, SecretSigner):
            register_secret(signer.secret)
        method = (
            "none" if signer is None else ("key" if needed and needed.method == "key" else "secret")
        )
        read_token: bytes | None = None
        try:
            read_token = self.home.read_token()
        except ConfigError as exc:
            problem = problem or exc.message
        client = RoomClient(
            hub.strict_url(), nick=self.nick, signer=signer, token=read_token, timeout=self.timeout
        )
        return client, Proof("strict", method, problem)


def _refused(what: str, exc: PostRejected, proof: Proof, nick: str) -> ToolError:
    text = f"the hub refused the {what} (HTTP {exc.status}): {exc.message}"
    if proof.problem:
        text += f" — this server holds no proof for {nick}: {proof.problem}"
    return ToolError(text)


def _line_filter(to: str | None) -> str | None:
    if to is None or to == "":
        return None
    try:
        return normalize_to(to)
    except ValueError as exc:
        raise ToolError(str(exc)) from None


class RoomTools:
    """The three tools as plain coroutines; `build_server` exposes them over MCP."""

    def __init__(self, door: RoomDoor) -> None:
        self.door = door

    @property
    def nick(self) -> str:
        return self.door.nick

    async def say(
        self,
        to: str,
        body: str,
        type: str = "chat",
        data: dict[str, Any] | None = None,
        in_reply_to: str | None = None,
        thread: str | None = None,
    ) -> dict[str, Any]:
        client, proof = self.door.client()
        async with client:
            try:  # the hub's own checks, before the round trip
                post = client.build(
                    to,
                    body,
                    type=type,
                    data=data,
                    in_reply_to=in_reply_to or None,
                    thread=thread or None,
                    nick=self.nick,
                )
            except BadPost as exc:
                raise ToolError(f"the post was not sent: {exc.message}") from None
            try:
                stored = await client.send(post)
            except PostRejected as exc:
                raise _refused("post", exc, proof, self.nick) from None
            except HubUnavailable as exc:
                raise ToolError(exc.message) from None
        log.info(
            "posted",
            nick=self.nick,
            seq=stored.get("seq"),
            to=stored.get("to"),
            verified=stored.get("verified"),
        )
        return stored

    async def read(
        self,
        after: int = 0,
        limit: int = 50,
        thread: str | None = None,
        to: str | None = None,
        wait: float = 0,
    ) -> dict[str, Any]:
        address = _line_filter(to)
        client, proof = self.door.client()
        async with client:
            try:
                lines, last = await client.read(
                    after, limit, thread=thread or None, to=address, wait=wait
                )
            except PostRejected as exc:
                raise _refused("read", exc, proof, self.nick) from None
            except HubUnavailable as exc:
                raise ToolError(exc.message) from None
        return {"messages": lines, "last_seq": last}

    async def thread(self, thread: str) -> dict[str, Any]:
        if not thread:
            raise ToolError("thread must name a run, like 'exp-7'")
        messages: list[dict[str, Any]] = []
        after = 0
        truncated = False
        client, proof = self.door.client()
        async with client:
            while True:
                try:
                    lines, last = await client.read(after, READ_LIMIT, thread=thread)
                except PostRejected as exc:
                    raise _refused("read", exc, proof, self.nick) from None
                except HubUnavailable as exc:
                    raise ToolError(exc.message) from None
                messages += lines
                after = max(after, last)
                if len(messages) >= THREAD_LIMIT:
                    truncated = len(lines) == READ_LIMIT
                    break
                if len(lines) < READ_LIMIT:
                    break
        return {"thread": thread, "messages": messages, "last_seq": after, "truncated": truncated}


def instructions(nick: str) -> str:
    return (
        f"You are @{nick} in a bullpen room: one shared, append-only log that a society of "
        "agents and people talk through. Every post you make is signed as "
        f"{nick}; you cannot post as anyone else. To answer a message, call room_say with "
        'to = its sender, type = "reply", in_reply_to = its id and thread = its thread. '
        "Use room_read to see new lines (pass the last_seq you got as `after`, and `wait` "
        "to long-poll), and room_thread to read one run's whole conversation."
    )


class RoomServer(MCPServer):
    """The SDK's server, refusing arguments a tool does not take instead of ignoring them.

    A caller that sends `from` (or a misspelt `in_reply_to`) learns at once that
    it was not used, rather than finding a post that is not what it meant.
    """

    def __init__(self, nick: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.nick = nick
        self.parameters: dict[str, frozenset[str]] = {}

    def add_tool(  # type: ignore[override]  # the same parameters, passed on by keyword
        self, fn: Callable[..., Any], name: str | None = None, **kwargs: Any
    ) -> None:
        super().add_tool(fn, name, **kwargs)
        self.parameters[name or fn.__name__] = frozenset(inspect.signature(fn).parameters)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        known = self.parameters.get(name)
        unknown = sorted(set(arguments) - known) if known is not None else []
        if unknown:
            hint = f" (this server always posts as {self.nick})" if "from" in unknown else ""
            raise ToolError(
                f"{name} takes no argument {', '.join(map(repr, unknown))}{hint}; "
                f"its arguments are {', '.join(sorted(known or ()))}"
            )
        return await super().call_tool(name, arguments, context)


def build_server(home: Home, nick: str, *, relaxed: bool = False) -> MCPServer:
    """An MCP server whose tools speak in `home`'s room as `nick`."""
    door = RoomDoor(home, nick, relaxed=relaxed)
    tools = RoomTools(door)
    server = RoomServer(
        nick,
        name="bullpen",
        title=f"bullpen room as @{nick}",
        instructions=instructions(nick),
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def room_say(
        to: Annotated[str, Field(description="the addressee: '@nick' or 'nick'")],
        body: Annotated[str, Field(description="the text, for people (at most 64 KiB)")],
        type: Annotated[
            MessageType, Field(description="ask, chat, ack, reply (an answer) or system")
        ] = "chat",
        data: Annotated[
            dict[str, Any] | None,
            Field(description="an optional JSON object for machines (at most 256 KiB)"),
        ] = None,
        in_reply_to: Annotated[
            str | None, Field(description="the id of the message this answers")
        ] = None,
        thread: Annotated[
            str | None, Field(description="the run this post belongs to; keep the asker's")
        ] = None,
    ) -> dict[str, Any]:
        """Post to the room as this server's nick and return the stored line.

        The stored line carries the hub's seq, id, ts and `verified` (true only when
        the hub proved this nick and the nick is privileged). To answer a message,
        use type "reply", to = its sender, in_reply_to = its id, thread = its thread.
        """
        return await tools.say(to, body, type, data, in_reply_to, thread)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def room_read(
        after: Annotated[int, Field(ge=0, description="only lines after this seq")] = 0,
        limit: Annotated[
            int, Field(ge=1, le=READ_LIMIT, description="at most this many lines")
        ] = 50,
        thread: Annotated[str | None, Field(description="only this run's lines")] = None,
        to: Annotated[str | None, Field(description="only lines addressed to this nick")] = None,
        wait: Annotated[
            float,
            Field(
                ge=0,
                le=MAX_WAIT_S,
                description="seconds to wait for a matching line when none is there yet",
            ),
        ] = 0,
    ) -> dict[str, Any]:
        """Read room lines after a seq: {"messages": [...], "last_seq": N}.

        Pass last_seq as `after` next time to continue where you stopped.
        """
        return await tools.read(after, limit, thread, to, wait)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def room_thread(
        thread: Annotated[str, Field(description="the run id, e.g. 'exp-7'")],
    ) -> dict[str, Any]:
        """One run's whole conversation, oldest first: {"thread", "messages", "last_seq", "truncated"}."""
        return await tools.thread(thread)

    from agents.mcp.memory import add_memory_tools  # recall and remember (docs/memory.md)

    add_memory_tools(server, home, door.client)
    return server

"""The hub: the room's only writer, serving it over HTTP on two listeners.

    POST /say          a post in, the stored line out (200), or a JSON error (4xx)
    GET  /read         lines after a seq, filtered, optionally long-polling
                       (strict: `Authorization: Bearer <read token>`)
    GET  /health       liveness and the room's head
    PUT  /objects/{sha256}, GET /objects/{sha256}
                       what steps hand each other across hosts (room/objectstore.py)
    GET  /openapi.json the schema of the above

Both listeners share one log and one gate; they differ only in the gate's
rule for privileged nicks (strict: proof required; relaxed: bearer token
required on every request, proof optional).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import structlog
import uvicorn
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from room import guard, openapi
from room.errors import BadRequest, BullpenError, DurabilityError, PostRejected
from room.limits import HubLimits, Limits
from room.log import Filter, RoomLog
from room.message import check_nick
from room.objectstore import OBJECTS_PREFIX, ObjectFolder, serve_object
from room.openapi import MAX_AFTER, MAX_READ_SENDERS
from room.params import int_param as _int_param
from room.readbody import FIRST_PAGE_LINES, ReadAnswer
from room.say import DirectSay, refuse_query_secrets, serve_say
from room.stopsignals import StopSignals
from room.tlog import TransparencyLog
from room.tlogapi import TlogEndpoints
from room.version import __version__
from trust.gate import Gate

log = structlog.get_logger("room.hub")

MAX_READ_LIMIT = 1000
MAX_WAIT_S = 60.0


async def _answered_before_routing(request: Request) -> Response:
    """POST /say never reaches the routes: __call__ hands it to room/say.py first."""
    raise RuntimeError("POST /say is answered by room/say.py before routing")


def _error(exc: BullpenError, status: int) -> JSONResponse:
    """The JSON answer, with the error's own headers (a 429's Retry-After)."""
    return JSONResponse(exc.to_dict(), status_code=status, headers=getattr(exc, "headers", None))


class Hub:
    """What both listeners share: the log and the gate."""

    def __init__(self, room_log: RoomLog, gate: Gate, limits: Limits | None = None) -> None:
        self.log = room_log
        self.gate = gate
        self.limits = limits  # room/limits.py: None bounds nothing (in-process tests)
        self.tlog: TransparencyLog | None = None  # the Merkle tree and its checkpoints
        self.objects: ObjectFolder | None = None  # PUT/GET /objects/{sha256}, when kept here
        self.stopping = asyncio.Event()  # ends every long-poll at once on shutdown

    async def _wait_for_lines(self, after: int, timeout: float) -> bool:
        waiting = asyncio.ensure_future(self.log.wait_for_lines(after, timeout))
        stopping = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait([waiting, stopping], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not waiting.done():
                waiting.cancel()
        return waiting.done() and not waiting.cancelled() and waiting.result()

    def app(self, relaxed: bool) -> ListenerApp:
        return ListenerApp(self, relaxed)


Endpoint = Callable[[Request], Awaitable[Response]]


class ListenerApp:
    """One listener as a plain ASGI app: four routes, every failure a JSON answer.

    Routing by a dict lookup instead of a middleware stack keeps the per-post
    cost low enough for the hub to stay ahead of fsync (docs/performance.md).
    """

    def __init__(self, hub: Hub, relaxed: bool) -> None:
        self.hub = hub
        self.relaxed = relaxed
        self.listener = "relaxed" if relaxed else "strict"
        self.routes: dict[str, tuple[str, Endpoint]] = {
            "/say": ("POST", _answered_before_routing),  # for the 405 of a GET /say
            "/read": ("GET", self.read),
            "/health": ("GET", self.health),
            "/openapi.json": ("GET", self.schema),
        }
        if hub.tlog is not None:  # /tlog/...: checkpoints and proofs (room/tlogapi.py)
            self.routes.update(TlogEndpoints(hub.tlog).routes())
        # POST /say taken by the listener's protocol itself, below ASGI (room/direct.py).
        self.direct = DirectSay(hub, relaxed, self.on_error, self._gone)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no lifespan or websockets here
        if scope["path"] == "/say" and scope["method"] == "POST":  # the hot path (room/say.py)
            await serve_say(self.hub, self.relaxed, scope, receive, send, self.on_error, self._gone)
            return
        request = Request(scope, receive)
        route = self.routes.get(scope["path"])
        try:
            if self.relaxed:  # the token first: without it, not even the routes are told
                self.hub.gate.check_bearer(request.headers.get("authorization"))
            refuse_query_secrets(self.hub.gate, scope["query_string"])
            if route is None and scope["path"].startswith(OBJECTS_PREFIX):  # it checks tokens
                route = (scope["method"], partial(serve_object, self.hub, relaxed=self.relaxed))
            if route is None:
                raise HTTPException(404)
            if scope["method"] != route[0]:
                raise HTTPException(405, headers={"Allow": route[0]})
            reading = route[1] == self.read or scope["path"].startswith("/tlog/")
            if not self.relaxed and reading:  # strict: reading needs the read token
                self.hub.gate.check_reader(request.headers.get("authorization"))
            response = await route[1](request)
        except ClientDisconnect:  # nobody to answer: one line, not a traceback per hang-up
            self._gone(scope["path"])
            return
        except Exception as exc:  # every failure becomes a JSON answer
            response = self.on_error(scope["path"], exc)
        await response(scope, receive, send)

    def _gone(self, path: str) -> None:
        log.info("client hung up mid-request", path=path, listener=self.listener)

    async def read(self, request: Request) -> Response:
        hub = self.hub
        after, limit, wait, flt = _read_params(request)
        page = min(limit, FIRST_PAGE_LINES)  # the rest, if any, is read as the answer is sent
        result = await hub.log.read(after, page, flt)
        deadline = asyncio.get_running_loop().time() + wait
        while not result.lines and wait > 0 and not hub.stopping.is_set():
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            # From max(after, head): a reader asking past the head never gets a line <= after.
            cursor = max(after, result.last_seq)
            if await hub._wait_for_lines(cursor, remaining):
                result = await hub.log.read(cursor, page, flt)
        limits = hub.limits.settings if hub.limits is not None else HubLimits()
        return ReadAnswer(hub.log, result, page, limit, flt, limits.read_max_bytes)  # type: ignore[return-value]

    async def health(self, request: Request) -> Response:
        """200 while the room can store a post; 503, saying why, while it cannot."""
        log = self.hub.log
        failed = log.failed
        problem = failed.message if failed is not None else log.unavailable
        body: dict[str, Any] = {
            "ok": problem is None,
            "version": __version__,  # a society running mixed versions shows it
            "listener": self.listener,
            "seq": log.head.seq,
            "head": log.head.hash,
            "readers_waiting": log.readers_waiting,
            "room_bytes": log.stored_bytes(),
        }
        if self.hub.gate.digest is not None:
            body["trust"] = self.hub.gate.digest  # which trust.toml the gate holds
        if self.hub.limits is not None:
            body.update(self.hub.limits.health(self.listener))
        if problem is not None:
            body["problem"] = problem
        return JSONResponse(body, status_code=200 if problem is None else 503)

    async def schema(self, request: Request) -> Response:
        return JSONResponse(openapi.schema(self.listener))

    def on_error(self, path: str, exc: Exception) -> Response:
        if isinstance(exc, PostRejected):
            return _error(exc, exc.status)
        if isinstance(exc, DurabilityError):
            return _error(exc, 503)
        if isinstance(exc, HTTPException):
            text = {404: "no such endpoint; see /openapi.json", 405: "method not allowed here"}
            message = text.get(exc.status_code, str(exc.detail))
            return JSONResponse(
                {"error": "http", "message": message},
                status_code=exc.status_code,
                headers=exc.headers,
            )
        log.exception("unexpected error serving a request", path=path)
        return JSONResponse(
            {"error": "internal", "message": "the hub hit an unexpected error; see its log"},
            status_code=500,
        )


_READ_PARAMS = {"after", "limit", "wait", "thread", "to", "from", "verified"}


def _nick_param(text: str, name: str) -> str:
    """A nick filter, `alice` or `@alice`, as the bare nick."""
    try:
        return check_nick(text.removeprefix("@"), name)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def _read_params(request: Request) -> tuple[int, int, float, Filter]:
    for name in request.query_params:
        if name not in _READ_PARAMS:
            raise BadRequest(
                f"unknown parameter {name[:40]!r}; /read takes {', '.join(sorted(_READ_PARAMS))}"
            )
    after = _int_param(request, "after", 0, 0, MAX_AFTER)
    limit = _int_param(request, "limit", 100, 1, MAX_READ_LIMIT)
    wait_text = request.query_params.get("wait")
    wait = 0.0
    if wait_text is not None:
        try:
            wait = float(wait_text)
        except ValueError:
            raise BadRequest(f"wait must be a number of seconds, got {wait_text[:40]!r}") from None
        if not 0 <= wait <= MAX_WAIT_S:
            raise BadRequest(f"wait must be between 0 and {MAX_WAIT_S:g} seconds")
    params = request.query_params
    to = "@" + _nick_param(params["to"], "to") if "to" in params else None
    # `from` once: that sender; repeated: any of them (a reader that trusts only these nicks).
    named = [_nick_param(text, "from") for text in params.getlist("from")]
    if len(named) > MAX_READ_SENDERS:
        raise BadRequest(f"from may be given at most {MAX_READ_SENDERS} times, got {len(named)}")
    sender = named[0] if len(named) == 1 else None
    senders = frozenset(named) if len(named) > 1 else None
    verified_text = params.get("verified")
    if verified_text not in (None, "true", "false"):
        raise BadRequest(f"verified must be true or false, got {verified_text[:40]!r}")
    verified = None if verified_text is None else verified_text == "true"
    thread = params.get("thread") or None
    return after, limit, wait, Filter(thread, to, sender, senders, verified)


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to the hub, which runs two of them."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind(host: str, port: int) -> socket.socket:
    """Bind a listening socket, or raise OSError with a message that says what to do."""
    try:
        return socket.create_server((host, port), backlog=1024, reuse_port=False)
    except OSError as exc:
        raise OSError(
            exc.errno,
            f"cannot listen on {host}:{port} ({exc.strerror}); another hub or program "
            "may be using it: stop it, or choose another address in society.toml [hub]",
        ) from None


@dataclass
class Listener:
    name: str
    sock: socket.socket
    relaxed: bool

    @property
    def address(self) -> str:
        host, port = self.sock.getsockname()[:2]
        return f"{host}:{port}"


@dataclass
class Serving:
    """Running servers; `stop()` ends them gracefully (and runs `on_stop` first)."""

    on_stop: list[Callable[[], Any]] = field(default_factory=list)
    servers: list[_Server] = field(default_factory=list)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    signals: StopSignals = field(default_factory=StopSignals)  # exit 130 after Ctrl-C

    def stop(self) -> None:
        for callback in self.on_stop:
            callback()
        for server in self.servers:
            server.should_exit = True
        self.stopped.set()


async def serve_asgi(
    apps: list[tuple[Any, socket.socket]],
    on_ready: Callable[[], Any] | None = None,
    serving: Serving | None = None,
    limits: HubLimits | None = None,
    guards: list[guard.ConnectionGuard] | None = None,
) -> None:
    """Serve each ASGI app on its bound socket until SIGTERM/SIGINT or `serving.stop()`.

    The hub's way of running uvicorn, shared with the model gateway
    (agents/gateway/server.py): no access log, no lifespan, httptools behind
    the connection guard (head, body and idle timeouts, a bound on connections:
    room/guard.py), no trust in proxy headers, signals handled here once for
    every server.
    """
    serving = serving or Serving()
    loop = asyncio.get_running_loop()
    serving.signals.install(loop, serving.stop)
    tasks = []
    limits = limits or HubLimits()
    if guards is None:
        guards = [
            guard.ConnectionGuard(
                limits.max_connections, limits.head_timeout_s, limits.body_timeout_s
            )
            for _ in apps
        ]
    for (app, sock), watch in zip(apps, guards, strict=True):
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            ws="none",  # no websockets here: not even their library is loaded
            http=guard.guarded_protocol(watch),  # head/body timeouts, bounded connections
            proxy_headers=False,  # trust no proxy's word on who is calling
            server_header=False,
            timeout_graceful_shutdown=5,
            timeout_keep_alive=limits.idle_timeout_s,  # type: ignore[arg-type]
        )
        server = _Server(config)
        serving.servers.append(server)
        tasks.append(asyncio.create_task(server.serve(sockets=[sock])))
    while not all(server.started for server in serving.servers):
        if any(task.done() for task in tasks):
            break
        await asyncio.sleep(0.01)
    if on_ready is not None:
        on_ready()
    await asyncio.wait(
        [*tasks, asyncio.create_task(serving.stopped.wait())],
        return_when=asyncio.FIRST_COMPLETED,
    )
    serving.stop()
    await asyncio.gather(*tasks, return_exceptions=True)
    serving.signals.remove(loop)


async def serve(
    hub: Hub, listeners: list[Listener], on_ready: Callable[[], Any] | None = None
) -> Serving:
    """Serve every listener until SIGTERM/SIGINT or `hub.log` fails; then return how it
    was stopped."""
    serving = Serving(on_stop=[hub.stopping.set])  # ends every long-poll at once
    previous_fatal = hub.log.on_fatal

    def fatal(exc: BaseException) -> None:
        if previous_fatal is not None:
            previous_fatal(exc)
        serving.stop()

    hub.log.on_fatal = fatal
    limits = hub.limits.settings if hub.limits is not None else HubLimits()
    guards = []
    for listener in listeners:
        watch = guard.ConnectionGuard(
            limits.max_connections, limits.head_timeout_s, limits.body_timeout_s
        )
        if hub.limits is not None:  # /health shows each listener's connections
            hub.limits.guards[listener.name] = watch
        guards.append(watch)
    apps = [(hub.app(listener.relaxed), listener.sock) for listener in listeners]
    await serve_asgi(apps, on_ready, serving, limits, guards)
    return serving

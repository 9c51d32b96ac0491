"""The room's stream on NATS: its settings, the connection, the stream itself, reading it.

Shared by the hub's log (room/jetstream.py), the lurkers' durable consumers
(room/jsfollow.py), the nonce store (trust/streamnonces.py) and the
export/import commands (agents/streamcmds.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import nats
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import api
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

from room.chain import GENESIS, line_hash
from room.errors import ConfigError, LogError
from room.log import Head

log = structlog.get_logger("room.jsstream")

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PREFIX = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")

# JetStream's answers to a publish whose condition failed.
WRONG_LAST_SEQUENCE = 10071
WRONG_LAST_MSG_ID = 10070
INSUFFICIENT_RESOURCES = 10023
# JetStream API calls (stream info, create, get): a cluster electing a leader can take seconds.
API_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class StreamSettings:
    """Where the room's stream lives and how the hub talks to it ([room] in society.toml)."""

    servers: tuple[str, ...] = ("nats://127.0.0.1:4222",)
    stream: str = "BULLPEN"
    prefix: str = "bullpen"
    replicas: int = 3
    credentials: str | None = None
    connect_timeout_s: float = 5.0
    publish_timeout_s: float = 5.0  # one attempt's wait for JetStream's acknowledgement
    append_deadline_s: float = 30.0  # then the post is answered 503
    max_batch: int = 256
    # Lines in flight at once. Above 1, the 2nd… line of a batch is guarded by
    # Nats-Expected-Last-Msg-Id; nats-server 2.15 fails the whole stream ("critical
    # write error: last msgid mismatch") when that guard trips in a cluster, so a
    # room with several hubs must keep 1 (the tests found it; docs/scaling.md).
    pipeline: int = 1
    cache_lines: int = 8192
    thread_index_size: int = 1024

    def __post_init__(self) -> None:
        if not self.servers:
            raise ConfigError(
                "[room] servers is empty; list the NATS servers, e.g. ['nats://127.0.0.1:4222']"
            )
        if not _NAME.match(self.stream):
            raise ConfigError(
                f"[room] stream {self.stream!r} is not a valid stream name: use letters, digits, - and _"
            )
        if not _PREFIX.match(self.prefix):
            raise ConfigError(
                f"[room] subject_prefix {self.prefix!r} must be dot-separated tokens of a-z, 0-9, - and _"
            )

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> StreamSettings:
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(
                f"unknown JetStream engine option(s) {unknown}; known: {sorted(known)}"
            )
        values = dict(options)
        if "servers" in values:
            values["servers"] = tuple(values["servers"])
        return cls(**values)

    @property
    def subjects(self) -> str:
        return f"{self.prefix}.>"

    def subject(self, to: str, kind: str) -> str:
        """`<prefix>.to.<nick>.<type>`: nicks and types are valid subject tokens by construction."""
        return f"{self.prefix}.to.{to.removeprefix('@')}.{kind}"

    def addressed_to(self, nick: str) -> str:
        return f"{self.prefix}.to.{nick}.>"

    @property
    def nonce_bucket(self) -> str:
        return f"{self.stream}_nonces"


async def connect(settings: StreamSettings, name: str) -> NATS:
    """A NATS connection that keeps reconnecting; raise LogError when no server answers at first."""

    async def on_error(exc: Exception) -> None:
        log.warning("nats connection error", error=str(exc) or type(exc).__name__, client=name)

    held: list[NATS] = []

    async def on_disconnect() -> None:
        if held and held[0].is_closed:
            return  # our own close(), not a lost server
        log.warning("disconnected from nats; reconnecting", client=name)

    async def on_reconnect() -> None:
        log.info("reconnected to nats", client=name)

    options: dict[str, Any] = {
        "servers": list(settings.servers),
        "name": name,
        "connect_timeout": settings.connect_timeout_s,
        "allow_reconnect": True,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 0.5,
        "error_cb": on_error,
        "disconnected_cb": on_disconnect,
        "reconnected_cb": on_reconnect,
    }
    if settings.credentials:
        options["user_credentials"] = settings.credentials
    try:
        held.append(await nats.connect(**options))
        return held[0]
    except Exception as exc:
        raise LogError(
            f"cannot reach NATS at {', '.join(settings.servers)} ({exc or type(exc).__name__}); "
            "start the NATS servers (docs/scaling.md) or fix [room] servers in society.toml"
        ) from None


def stream_config(settings: StreamSettings) -> api.StreamConfig:
    """The room's stream: append-only (no deletes, no purges), every line kept."""
    return api.StreamConfig(
        name=settings.stream,
        description="bullpen room: one line per message; the stream sequence is the line's seq",
        subjects=[settings.subjects],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        num_replicas=settings.replicas,
        discard=api.DiscardPolicy.OLD,
        duplicate_window=120.0,
        deny_delete=True,
        deny_purge=True,
        allow_rollup_hdrs=False,
    )


async def ensure_stream(
    js: JetStreamContext, settings: StreamSettings, create: bool = True
) -> tuple[api.StreamInfo, list[str]]:
    """The room's stream, created when missing; notes on anything that differs from the settings."""
    notes: list[str] = []
    try:
        info = await js.stream_info(settings.stream)
    except NotFoundError:
        if not create:
            raise LogError(
                f"there is no stream {settings.stream!r} on {', '.join(settings.servers)}; "
                "start a hub once to create it, or check [room] stream in society.toml"
            ) from None
        try:
            info = await js.add_stream(stream_config(settings))
        except Exception as exc:
            code = getattr(exc, "err_code", None)
            if code == INSUFFICIENT_RESOURCES or "insufficient resources" in str(exc):
                raise ConfigError(
                    f"NATS cannot place a stream with {settings.replicas} replicas ({exc}); the "
                    "cluster needs that many JetStream servers: set [room] replicas to the number "
                    "of servers (1 for a single server)"
                ) from None
            raise LogError(f"creating the stream {settings.stream!r} failed: {exc}") from None
        notes.append(f"created the stream {settings.stream} with {settings.replicas} replica(s)")
    config = info.config
    if list(config.subjects or []) != [settings.subjects]:
        raise ConfigError(
            f"the stream {settings.stream!r} takes subjects {config.subjects}, not "
            f"[{settings.subjects!r}]: it is not this room's stream. Choose another [room] stream "
            "or subject_prefix in society.toml"
        )
    if (config.num_replicas or 1) != settings.replicas:
        notes.append(
            f"the stream {settings.stream} has {config.num_replicas} replica(s), society.toml says "
            f"{settings.replicas}; the stream's own setting applies"
        )
    return info, notes


async def stream_tip(js: JetStreamContext, settings: StreamSettings) -> Head:
    """The stream's real last line: its seq and the hash of its bytes."""
    info = await js.stream_info(settings.stream)
    last = info.state.last_seq
    if last == 0:
        return Head(0, GENESIS)
    msg = await js.get_msg(settings.stream, last)
    return Head(last, line_hash(msg.data or b""))


async def scan(
    js: JetStreamContext,
    settings: StreamSettings,
    start: int,
    end: int | None = None,
    subject: str | None = None,
) -> AsyncIterator[tuple[int, bytes]]:
    """(seq, line) from `start` on, in order, through a short-lived ordered consumer.

    Stops after `end` (or the stream's last seq when it began); with a
    `subject` filter, when nothing matching is left before that.
    """
    if end is None:
        end = (await js.stream_info(settings.stream)).state.last_seq
    if start > end:
        return
    sub = await js.subscribe(
        subject or settings.subjects,
        stream=settings.stream,
        ordered_consumer=True,
        idle_heartbeat=1.0,
        deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
        config=api.ConsumerConfig(opt_start_seq=start),
    )
    try:
        if subject is not None:
            info = await sub.consumer_info()
            if not info.num_pending:
                return
        while True:
            msg = await sub.next_msg(timeout=30.0)
            meta = msg.metadata
            seq = meta.sequence.stream
            if seq > end:
                return
            yield seq, msg.data
            if seq == end or (subject is not None and meta.num_pending == 0):
                return
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


class Publisher:
    """Publishes in order on one connection and matches each JetStream answer to its message.

    nats-py's publish_async never resolves a future whose answer is an
    error, and its request() gives no ordering guarantee between
    concurrent calls; the room needs both.
    """

    def __init__(self, nc: NATS) -> None:
        self._nc = nc
        self._prefix = ""
        self._futures: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._count = 0

    async def start(self) -> None:
        self._prefix = self._nc.new_inbox() + "."
        await self._nc.subscribe(self._prefix + "*", cb=self._answer)

    async def _answer(self, msg: Msg) -> None:
        future = self._futures.pop(msg.subject[len(self._prefix) :], None)
        if future is None or future.done():
            return
        status = (msg.headers or {}).get("Status")
        if status == "503":
            future.set_result({"error": {"code": 503, "description": "no stream is listening"}})
            return
        try:
            future.set_result(json.loads(msg.data))
        except ValueError:
            future.set_result({"error": {"code": 500, "description": "unreadable answer"}})

    async def publish(
        self, subject: str, payload: bytes, headers: dict[str, str]
    ) -> asyncio.Future[dict[str, Any]]:
        self._count += 1
        token = str(self._count)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._futures[token] = future
        await self._nc.publish(subject, payload, reply=self._prefix + token, headers=headers)
        return future

    def forget(self, futures: list[asyncio.Future[dict[str, Any]]]) -> None:
        for token, future in list(self._futures.items()):
            if future in futures:
                del self._futures[token]

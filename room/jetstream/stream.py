"""The room's stream on NATS: its settings, the connection, the stream itself, reading it.

Shared by the hub's log (room/jetstream/engine.py), the lurkers' durable consumers
(room/jetstream/follow.py), the nonce store (trust/streamnonces.py) and the
export/import commands (agents/cli/stream.py).

What NATS raises becomes a bullpen error here (`nats_failure`), once, for
every caller: a ConfigError (exit 78) when only a person can fix it — no
JetStream on the server, replicas it cannot hold, subjects another stream
takes, refused credentials — and a LogError (exit 1) when waiting can —
no server reachable yet, a cluster without quorum, a slow answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from asyncio import FIRST_COMPLETED
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import nats.errors
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import api
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError, ServiceUnavailableError

from room.chain import GENESIS, line_hash
from room.errors import BullpenError, ConfigError, LogError
from room.linecache import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES
from room.log import Head
from room.message import Message, parse_line

log = structlog.get_logger("room.jetstream.stream")

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PREFIX = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")

# JetStream's answers to a publish whose condition failed.
WRONG_LAST_SEQUENCE = 10071
WRONG_LAST_MSG_ID = 10070
# JetStream's error codes for what a person must fix, and for a cluster not ready yet.
INSUFFICIENT_RESOURCES = 10023
NO_SUITABLE_PEERS = 10005
REPLICAS_NOT_SUPPORTED = 10074  # "replicas > 1 not supported in non-clustered mode"
SUBJECTS_OVERLAP = 10065
JETSTREAM_NOT_ENABLED = (10076, 10039)  # for the server, for the account
CLUSTER_NOT_AVAILABLE = 10008  # "JetStream system temporarily unavailable": no quorum yet
# JetStream API calls (stream info, create, get): a cluster electing a leader can take seconds.
API_TIMEOUT_S = 20.0
# While reconnecting, the same connection error is logged at most this often.
ERROR_REPEAT_S = 30.0


@dataclass(frozen=True)
class StreamSettings:
    """Where the room's stream lives and how the hub talks to it ([room] in society.toml)."""

    servers: tuple[str, ...] = ("nats://127.0.0.1:4222",)
    stream: str = "BULLPEN"
    prefix: str = "bullpen"
    replicas: int = 3
    credentials: str | None = None
    connect_timeout_s: float = 5.0  # one attempt to open a connection to one server
    # How long the first connection keeps trying every server before the command gives up.
    # Once connected, a connection reconnects for as long as the process runs.
    connect_deadline_s: float = 10.0
    publish_timeout_s: float = 5.0  # one attempt's wait for JetStream's acknowledgement
    append_deadline_s: float = 30.0  # then the post is answered 503
    max_batch: int = 256
    # Lines in flight at once. Above 1, the 2nd… line of a batch is guarded by
    # Nats-Expected-Last-Msg-Id; nats-server 2.15 fails the whole stream ("critical
    # write error: last msgid mismatch") when that guard trips in a cluster, so a
    # room with several hubs must keep 1 (the tests found it; docs/scaling.md).
    pipeline: int = 1
    cache_lines: int = DEFAULT_MAX_LINES
    cache_max_bytes: int = DEFAULT_MAX_BYTES  # the hub sets it from [hub] cache_max_bytes
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


async def connect(settings: StreamSettings, name: str, *, deadline_s: float | None = None) -> NATS:
    """A NATS connection that reconnects forever once made; the first connect is bounded.

    nats-py applies max_reconnect_attempts to the first connect too, so with
    unlimited reconnects it would try a dead address forever. Here the first
    connect gives up after `deadline_s` (the settings' connect_deadline_s) with
    a LogError (exit 1: start NATS, the hub is started again), or at once with
    a ConfigError when a server refuses the credentials (exit 78).
    """
    deadline = settings.connect_deadline_s if deadline_s is None else deadline_s
    where = ", ".join(settings.servers)
    first: list[BaseException] = []  # errors of the first connect, not yet logged one by one
    refused = asyncio.Event()
    connected = False
    said: dict[str, float] = {}  # each error's text, when it was last logged

    async def on_error(exc: Exception) -> None:
        if not connected:
            if not first:
                log.warning(
                    "cannot reach nats yet; still trying",
                    error=str(exc) or type(exc).__name__,
                    client=name,
                    servers=where,
                    for_s=deadline,
                )
            first.append(exc)
            if _refusal(exc):
                refused.set()
            return
        text = str(exc) or type(exc).__name__
        now = time.monotonic()
        if now - said.get(text, -ERROR_REPEAT_S) >= ERROR_REPEAT_S:  # not every 0.5 s retry
            said[text] = now
            log.warning("nats connection error", error=text, client=name)

    nc = NATS()

    async def on_disconnect() -> None:
        if nc.is_closed:
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
    connecting = asyncio.ensure_future(nc.connect(**options))
    refusing = asyncio.ensure_future(refused.wait())
    try:
        await asyncio.wait({connecting, refusing}, timeout=deadline, return_when=FIRST_COMPLETED)
    finally:
        refusing.cancel()
        if not connecting.done():
            connecting.cancel()
        await asyncio.gather(connecting, refusing, return_exceptions=True)
    error: BaseException | None = None
    if not connecting.cancelled():
        error = connecting.exception()
        if error is None:
            connected = True
            if first:
                log.info("connected to nats", client=name, after_errors=len(first))
            return nc
    with contextlib.suppress(Exception):
        await nc.close()
    last = error or (first[-1] if first else None)
    why = (str(last) or type(last).__name__) if last is not None else "no answer"
    if refused.is_set() or (last is not None and _refusal(last)):
        raise ConfigError(
            f"the NATS servers at {where} refused the connection ({why}); check [room] "
            "credentials in society.toml (a .creds file the servers accept) and the servers' "
            "authorization settings"
        )
    if isinstance(error, ValueError | TypeError):
        raise ConfigError(f"[room] servers {list(settings.servers)} cannot be used ({why})")
    raise LogError(
        f"cannot reach NATS at {where} within {deadline:g} s ({why}); start the NATS servers "
        "(`bullpen docs scaling`) or fix [room] servers in society.toml"
    )


def _refusal(exc: BaseException) -> bool:
    """The server refused who we are (as opposed to not answering)."""
    text = str(exc).lower()
    return isinstance(exc, nats.errors.AuthorizationError) or "authorization violation" in text


def nats_failure(exc: BaseException, settings: StreamSettings, doing: str) -> BullpenError:
    """What a NATS or JetStream error means for the room, as the bullpen error to raise.

    `doing` says what was being done ("opening the stream"). Anything not
    recognised is a LogError that repeats NATS's own words.
    """
    where = ", ".join(settings.servers)
    if isinstance(exc, BullpenError):
        return exc
    code = getattr(exc, "err_code", None)
    description = getattr(exc, "description", None) or str(exc) or type(exc).__name__
    no_answer = isinstance(exc, ServiceUnavailableError) and exc.code is None and code is None
    if no_answer or isinstance(exc, nats.errors.NoRespondersError):
        # A 503 with no JetStream error: nothing answered the JetStream API at all.
        return ConfigError(
            f"the NATS server at {where} runs without JetStream (no JetStream answered while "
            f"{doing}); start nats-server with -js, or add a `jetstream {{}}` block (with its "
            "store_dir) to its config (`bullpen docs scaling`), then start this again"
        )
    if code in JETSTREAM_NOT_ENABLED:
        return ConfigError(
            f"JetStream is not enabled on the NATS servers at {where} ({description}); start "
            "nats-server with -js, or add a `jetstream {}` block to its config (and enable "
            "JetStream for the account the hub uses), then start this again"
        )
    if code == REPLICAS_NOT_SUPPORTED:
        return ConfigError(
            f"the NATS server at {where} is not clustered, so it keeps one copy of a stream, "
            f"and [room] replicas is {settings.replicas} ({description}); set replicas = 1 in "
            "society.toml for a single server, or run a cluster of at least "
            f"{settings.replicas} JetStream servers (`bullpen docs scaling`)"
        )
    if code in (INSUFFICIENT_RESOURCES, NO_SUITABLE_PEERS) or "insufficient resources" in str(exc):
        return ConfigError(
            f"NATS cannot place a stream with {settings.replicas} replicas ({description}); the "
            "cluster needs that many JetStream servers: set [room] replicas to the number "
            "of servers (1 for a single server)"
        )
    if code == SUBJECTS_OVERLAP:
        return ConfigError(
            f"another stream on the NATS servers at {where} already takes subjects that overlap "
            f"{settings.subjects!r} ({description}): another room (or program) uses that subject "
            "prefix. Give this room its own [room] subject_prefix in society.toml (or point "
            "[room] stream at the stream that already holds this room)"
        )
    if code == CLUSTER_NOT_AVAILABLE:
        return LogError(
            f"the NATS cluster at {where} is not ready ({description}): JetStream has no "
            "quorum yet. Start the servers that are down, or wait for them to elect a leader, "
            f"then try again (nothing was changed while {doing})"
        )
    if isinstance(exc, nats.errors.TimeoutError | TimeoutError):
        return LogError(
            f"the NATS servers at {where} did not answer in time while {doing}; the cluster "
            "may be electing a leader, short of quorum or overloaded: try again shortly"
        )
    return LogError(f"{doing} failed on the NATS servers at {where}: {description}")


def sync_warning(version: str) -> str | None:
    """The start-up warning for a server that cannot fsync before it acknowledges, else None.

    `sync_interval: always` exists from nats-server 2.10 on; an older server
    (Debian 12's 2.9.10) syncs to disk every 2 minutes. A version that cannot
    be read is warned about, since nothing says it can.
    """
    match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", version)
    if match and (int(match[1]), int(match[2])) >= (2, 10):
        return None
    return (
        f"the NATS server runs version {version}, older than 2.10: it cannot fsync a post "
        "before acknowledging it (sync_interval: always), so an acknowledged post can be lost "
        "if every server of the cluster loses power at once. Run nats-server >= 2.10 with "
        "sync_interval: always where that matters (Durability in `bullpen docs scaling`)"
    )


def drop_unsent(nc: NATS) -> int:
    """Throw away what the client buffered for a server it could not reach; the bytes dropped.

    nats-py keeps publishes made while it is disconnected and sends them when
    it reconnects. After the hub told a poster that a post may not have been
    stored, none of it may be sent later. This reaches into the client's
    buffer (there is no public call for it); tests/jetstream/test_outage.py
    checks that nothing is published after the hub gave up.
    """
    dropped = int(getattr(nc, "_pending_data_size", 0))
    nc._pending = []
    nc._pending_data_size = 0
    return dropped


def room_line(seq: int, raw: bytes) -> Message | None:
    """The room message a stream message holds, or None when it is not a room line at its seq.

    Only hubs should publish to the stream; anything else (a client past the
    gate, another program) is skipped by every reader, never served as a line.
    """
    try:
        message = parse_line(raw)
    except ValueError:
        return None
    return message if message.seq == seq else None


def why_not_a_line(seq: int, raw: bytes) -> str:
    """Why room_line refused it, for the warning that names the seq."""
    try:
        message = parse_line(raw)
    except ValueError as exc:
        return str(exc)
    return f"it claims seq {message.seq}, but it is stream message {seq}"


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
    """The room's stream, created when missing; notes on anything that differs from the settings.

    Raise ConfigError or LogError (never a NATS error) when it cannot be had.
    """
    notes: list[str] = []
    try:
        try:
            info = await js.stream_info(settings.stream)
        except NotFoundError:
            if not create:
                raise LogError(
                    f"there is no stream {settings.stream!r} on {', '.join(settings.servers)}; "
                    "start a hub once to create it, or check [room] stream in society.toml"
                ) from None
            info = await js.add_stream(stream_config(settings))
            notes.append(
                f"created the stream {settings.stream} with {settings.replicas} replica(s)"
            )
    except (nats.errors.Error, TimeoutError) as exc:
        doing = "creating the stream" if create else "looking up the stream"
        raise nats_failure(exc, settings, f"{doing} {settings.stream!r}") from None
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

"""Running a hub: open the log, load the gate, bind both listeners, serve, close.

Exit codes: 0 after a clean stop; 1 when the hub could not start (the room
is locked, a port is taken, the NATS servers are not reachable or not ready
yet: systemd and `bullpen up` start it again); 70 when it stopped because the
room could not store a post (a failed fsync, a post the NATS servers did not
confirm); 78 when only a person can help: a configuration error, or a room
damaged beyond a torn tail or contradicting the hub's checkpoint (systemd
units do not restart on it).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from room import fileio, logs
from room.chain import line_hash
from room.errors import BullpenError, ConfigError, DurabilityError, RoomCorrupt
from room.guard import connection_bound, raise_fd_limit
from room.hub import Hub, Listener, bind, serve
from room.jsonl import Checkpointed, JsonlLog
from room.limits import HubLimits, Limits
from room.log import RoomLog
from room.objectstore import ObjectFolder
from room.tlog import Opened, TransparencyLog, default_origin, open_tlog
from room.version import __version__
from trust import checkpoint, hubkey
from trust import table as trust_table
from trust.gate import Gate
from trust.nonces import NonceStore
from trust.note import Verifier
from trust.screen import Screen
from trust.secretfiles import ensure_secret_text, read_secret_text
from trust.table import TrustTable

log = structlog.get_logger("room.service")

EXIT_OK, EXIT_START, EXIT_DISK, EXIT_CONFIG = 0, 1, 70, 78


@dataclass(frozen=True)
class HubSettings:
    room: Path
    trust: TrustTable
    strict: tuple[str, int]
    relaxed: tuple[str, int] | None
    checkpoint_interval_s: float = 1.0
    engine: str = "jsonl"
    engine_options: dict[str, Any] = field(default_factory=dict)
    limits: HubLimits = field(default_factory=HubLimits)
    tlog_origin: str | None = None  # the checkpoints' origin line (room/tlog.py default_origin)
    witnesses: tuple[Verifier, ...] = ()  # whose cosignatures the hub keeps ([hub] witnesses)
    # A JSONL room's object store (room/objectstore.py): its folder and [objects] max_bytes.
    objects: Path | None = None
    objects_max_bytes: int = 64 * 1024 * 1024


def build_log(
    settings: HubSettings, known: Checkpointed | None = None
) -> tuple[RoomLog, NonceStore]:
    """The configured log engine and the nonce store that goes with it."""
    if settings.engine == "jsonl":
        settings.room.parent.mkdir(parents=True, exist_ok=True)
        # The nonces live in the room's lines (trust/nonces.py): no journal to sync per batch.
        nonces = NonceStore(nonce_journal(settings.room))
        room_log = JsonlLog(
            settings.room,
            io=fileio.from_environment(),
            checkpoint=known,
            cache_max_bytes=settings.limits.cache_max_bytes,
        )
        return room_log, nonces
    if settings.engine == "jetstream":
        from room.jetstream.engine import JetStreamLog
        from room.jetstream.stream import StreamSettings
        from trust.streamnonces import StreamNonces

        settings.room.parent.mkdir(parents=True, exist_ok=True)  # the checkpoint lives there
        stream = StreamSettings.from_options(settings.engine_options)
        stream_log = JetStreamLog(replace(stream, cache_max_bytes=settings.limits.cache_max_bytes))
        shared = StreamNonces()  # every hub on the stream sees every nonce
        stream_log.nonces = shared
        return stream_log, shared
    raise ConfigError(f"unknown room engine {settings.engine!r}; use jsonl or jetstream")


def nonce_journal(room: Path) -> Path:
    """Where hubs before nonces moved into the lines kept them: read at start, never written."""
    return room.with_name(room.name + ".nonces")


def checkpoint_file(room: Path) -> Path:
    return room.with_name(room.name + ".checkpoint")


class Checkpointer:
    """Signs the tree's note and the room's JSON checkpoint soon after the room grows.

    A line is provable once a signed note covers it, so the hub signs right
    after the room grows (Tessera integrates within about a second), batched:
    at most one checkpoint per `interval_s`, so a burst of posts costs one
    signature and one fsync of the tree, not one each. The tree is made
    durable and its note signed *before* the JSON checkpoint is written: a JSON
    checkpoint never names a head the signed tree on disk does not hold, so an
    audit after a crash locates a rewrite by the tree whatever the timing.
    """

    def __init__(
        self, room: Path, room_log: RoomLog, key: Ed25519PrivateKey, tlog: TransparencyLog
    ) -> None:
        self.path = checkpoint_file(room)
        self._log = room_log
        self._key = key
        self._last_seq = -1
        self.tlog = tlog

    def write(self) -> None:
        head = self._log.head
        if head.seq == self._last_seq:
            return
        checkpoint.write(self.path, checkpoint.make(self._key, head.seq, head.hash))
        self._last_seq = head.seq

    async def checkpoint(self) -> None:
        """The tree's note, then the JSON checkpoint (OSError: neither was written)."""
        await self.tlog.sign()
        await asyncio.to_thread(self.write)

    async def every(self, interval_s: float) -> None:
        loop = asyncio.get_running_loop()
        signed_at = -interval_s
        while True:
            await self.tlog.grown.wait()
            await asyncio.sleep(max(0.0, signed_at + interval_s - loop.time()))
            self.tlog.grown.clear()  # lines stored from here on call for the next one
            signed_at = loop.time()
            try:
                await self.checkpoint()
            except OSError as exc:
                self.tlog.grown.set()  # tried again after the interval
                log.warning("could not write a checkpoint", error=str(exc), path=str(self.path))


def _read_checkpoint(path: Path, key: Ed25519PrivateKey) -> tuple[Checkpointed | None, str | None]:
    """The hub's last checkpoint when it verifies, else why not (None, None: there is none).

    Read before the room is opened: recovery must know what was acknowledged
    before it decides what a torn tail is.
    """
    if not path.exists():
        return None, None
    try:
        mark = checkpoint.load(path, key.public_key())
    except ConfigError as exc:
        return None, exc.message
    return Checkpointed(mark.seq, mark.head, path), None


async def _contradiction(room_log: RoomLog, known: Checkpointed) -> str | None:
    """Why the opened room contradicts the checkpoint, if it does (cut short or rewritten).

    The JSONL engine refuses such a room while recovering; this is the same
    check for an engine that has no recovery of its own (JetStream).
    """
    head = room_log.head.seq
    if known.seq > head:
        return (
            f"the room ends at seq {head}, but the hub's last checkpoint recorded seq "
            f"{known.seq}: acknowledged lines were lost (a damaged disk, a cut) or the room "
            "was replaced"
        )
    if known.seq:  # the exact bytes at that seq, whatever they hold (a stream may hold
        # a message no hub wrote: it is the head the checkpoint recorded all the same)
        found = await room_log.line_at(known.seq)
        if found is None or line_hash(found) != known.hash:
            return (
                f"line {known.seq} of the room is not the one the hub's last checkpoint "
                "recorded: the room was rewritten"
            )
    return None


def _keep_aside(path: Path, problem: str) -> str:
    """Move aside a checkpoint that does not verify, so the next one cannot overwrite it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    kept = path.with_name(f"{path.name}.contradicted-{stamp}")
    os.replace(path, kept)
    return f"{problem}. That checkpoint is kept as {kept}; check it with `bullpen audit --checkpoint {kept}`"


def _same_key(witness: Verifier, key: Ed25519PrivateKey) -> bool:
    return witness.public.public_bytes_raw() == key.public_key().public_bytes_raw()


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def run_hub(settings: HubSettings) -> int:
    """Serve until stopped; return the process exit code."""
    trust = settings.trust
    try:
        secret = read_secret_text(trust.secret_file, "shared secret file")
        token = (
            read_secret_text(trust.relaxed_token_file, "relaxed token file")
            if settings.relaxed
            else None
        )
        hub_key = hubkey.load(trust)
        read_token, made = ensure_secret_text(trust.read_token_file, "read token file")
    except ConfigError as exc:
        _say(f"bullpen hub: {exc.message}")
        return EXIT_CONFIG
    except OSError as exc:
        _say(
            f"bullpen hub: cannot create the read token file {trust.read_token_file} "
            f"({exc.strerror or exc}); make its folder writable, or create it with "
            f"`umask 077; openssl rand -hex 32 > {trust.read_token_file}`"
        )
        return EXIT_CONFIG
    own = [w.name for w in settings.witnesses if _same_key(w, hub_key)]
    if own:
        _say(
            f"bullpen hub: [hub] witnesses names the hub's own key ({own[0]}): a witness is a "
            "different key that cosigns the hub's checkpoints; remove it from society.toml"
        )
        return EXIT_CONFIG
    logs.register_secret(secret)
    logs.register_secret(read_token)
    if token:
        logs.register_secret(token)
    if made:  # a home from before reads needed a token: it has one now
        log.warning("created the read token file", path=str(trust.read_token_file))
        _say(
            f"bullpen hub: created the read token file {trust.read_token_file} (0600); "
            "/read on the strict listener now needs it (`bullpen docs operating`)"
        )
    # Before anything opens a descriptor: 20,000 sockets must fit (room/guard.py).
    fd_limit = raise_fd_limit()

    known, unverified = _read_checkpoint(checkpoint_file(settings.room), hub_key)
    try:
        room_log, nonces = build_log(settings, known)
        # The room first: a hub refused the room (another holds its lock) must not
        # touch the nonce journal, which the running hub is appending to.
        report = await room_log.open()
    except BullpenError as exc:
        _say(f"bullpen hub: {exc.message}")
        if isinstance(exc, ConfigError | RoomCorrupt):  # only a person can fix these
            return EXIT_CONFIG
        return EXIT_DISK if isinstance(exc, DurabilityError) else EXIT_START
    try:  # the nonces of the last two windows, from the room's tail (and a legacy journal)
        nonces.open(settings.room if settings.engine == "jsonl" else None)
    except OSError as exc:
        await room_log.close()
        _say(
            f"bullpen hub: cannot read the room's recent proof nonces ({exc.strerror or exc}); "
            "fix the disk, then start the hub again"
        )
        return EXIT_DISK
    problem = None if known is None else await _contradiction(room_log, known)
    if problem is not None:
        await room_log.close()
        nonces.close()
        _say(
            f"bullpen hub: {problem}. The hub will not start on it: run `bullpen audit`, "
            f"restore the room from a backup, or move {known.path if known else ''} aside if "
            "the room was deliberately started over"
        )
        return EXIT_CONFIG
    opened: Opened | None = None
    try:
        opened = await open_tlog(
            settings.room,
            room_log,
            hub_key,
            settings.tlog_origin or default_origin(),
            lambda: trust.public_keys,
            floor=known.seq if known is not None else 0,
            witnesses=settings.witnesses,
        )
        problem = opened.problem
    except (OSError, ValueError) as exc:
        problem = f"the room's Merkle tree could not be opened or built ({exc})"
    if problem is not None or opened is None:
        await room_log.close()
        nonces.close()
        _say(
            f"bullpen hub: {problem}. The hub will not start on it (nor sign it): run "
            "`bullpen audit`, and restore the room from a backup (`bullpen docs audit`)"
        )
        return EXIT_CONFIG
    tlog = opened.tlog
    room_log.on_stored = tlog.stored
    room_log.serving()  # every check passed: only now may followers act on what it holds
    if opened.rebuilt:
        log.warning("rebuilt the room's Merkle tree from the room", lines=tlog.tree.size)
    for note in report.notes:
        _say(f"bullpen hub: {note}")
    if unverified is not None:
        warning = _keep_aside(checkpoint_file(settings.room), unverified)
        log.warning("the last checkpoint does not verify", detail=warning)
        _say(f"bullpen hub: WARNING: {warning}")

    try:
        listeners = [Listener("strict", bind(*settings.strict), relaxed=False)]
        if settings.relaxed:
            listeners.append(Listener("relaxed", bind(*settings.relaxed), relaxed=True))
    except OSError as exc:
        await room_log.close()
        nonces.close()
        _say(f"bullpen hub: {exc.strerror}")
        return EXIT_START

    fatal: list[BaseException] = []
    room_log.on_fatal = fatal.append
    gate = Gate(trust, secret, token, nonces, screen=Screen.of_trust(trust), read_token=read_token)
    gate.digest = trust_table.digest(trust.path)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, _reread_trust, gate, trust)
    bound = connection_bound(settings.limits.max_connections, len(listeners), fd_limit)
    limits = Limits(replace(settings.limits, max_connections=bound), settings.room.parent)

    def ready() -> None:
        where = ", ".join(f"{item.name} {item.address}" for item in listeners)
        log.info(
            "hub listening",
            **room_log.describe(),
            seq=report.head.seq,
            listeners=where,
            version=__version__,
        )

    checkpointer = Checkpointer(settings.room, room_log, hub_key, tlog)
    ticker = asyncio.create_task(checkpointer.every(settings.checkpoint_interval_s))
    hub = Hub(room_log, gate, limits)
    hub.tlog = tlog
    if settings.objects is not None and settings.engine == "jsonl":  # JetStream: NATS keeps them
        hub.objects = ObjectFolder(
            settings.objects, settings.objects_max_bytes, settings.limits.min_free_disk_bytes
        )
    try:
        await _sign(tlog.sign)  # a note for the room as it opened, before anyone asks for one
        serving = await serve(hub, listeners, on_ready=ready)
    finally:
        ticker.cancel()
        await room_log.close()
        nonces.close()
        if not fatal:
            await _sign(checkpointer.checkpoint)
        try:
            tlog.tree.close()
        except OSError as exc:  # the room is what counts: the next start rebuilds the tree
            log.warning(
                "the Merkle tree could not be flushed; it is rebuilt on start", error=str(exc)
            )
    if fatal:
        error = fatal[0]
        message = error.message if isinstance(error, DurabilityError) else str(error)
        _say(f"bullpen hub: {message}")
        return EXIT_DISK
    log.info("hub stopped", seq=room_log.head.seq)
    return serving.signals.exit_code(EXIT_OK)


async def _sign(sign: Callable[[], Awaitable[object]]) -> None:
    try:
        await sign()
    except OSError as exc:
        log.warning("could not sign the tree's checkpoint note", error=str(exc))


def _reread_trust(gate: Gate, started: TrustTable) -> None:
    """SIGHUP: read trust.toml again and take up its [privileged] (`bullpen trust promote`).

    A file that does not load leaves the table the hub has; its secret, token and key
    files are those it started with (a change to their paths needs a restart).
    """
    try:
        digest = trust_table.digest(started.path)
        fresh = trust_table.load(started.path)
        screen = Screen.of_trust(fresh)
    except (BullpenError, OSError) as exc:
        reason = exc.message if isinstance(exc, BullpenError) else str(exc)
        log.error("trust.toml was not read again; the hub keeps its table", error=reason)
        return
    gate.retable(fresh, screen, digest)
    log.info("read trust.toml again", privileged=sorted(fresh.privileged), trust=digest)


def main(settings: HubSettings) -> int:
    try:
        import uvloop

        return uvloop.run(run_hub(settings))
    except ImportError:  # pragma: no cover - uvloop is a Linux dependency
        return asyncio.run(run_hub(settings))

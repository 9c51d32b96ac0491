"""Seen proof nonces shared by every hub on one stream: a JetStream KeyValue bucket.

A hub's own record (trust/nonces.py: the nonces in its room's lines) cannot see what another hub accepted,
so with several hubs a captured proof could be replayed once per hub. Here
a nonce is reserved by creating its key, which succeeds for exactly one
hub; the bucket forgets keys after twice the proof window (a proof outside
the window is refused by its timestamp anyway). The bucket is replicated
like the room's stream, and a reservation is acknowledged before the post
is published, so a post is never stored while its nonce could be forgotten.

A reservation whose answer was lost is retried with the same token; a key
found holding our own token is our earlier attempt, not a replay.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import TYPE_CHECKING

import structlog
from nats.js import api
from nats.js.errors import KeyWrongLastSequenceError, NotFoundError

from room.errors import DurabilityError
from trust.nonces import NonceStore

if TYPE_CHECKING:
    from nats.js.client import JetStreamContext
    from nats.js.kv import KeyValue

    from room.jetstream.stream import StreamSettings

log = structlog.get_logger("trust.streamnonces")


class StreamNonces(NonceStore):
    """The nonce store for hubs on a JetStream room (the log binds it when it opens).

    A NonceStore with no room to read, so the hub's open/close do nothing;
    reservations go through `reserve_async`, which `Gate.admit` uses.
    """

    synchronous = False  # every reservation is a round trip: the hub awaits reserve_async

    def __init__(self, window_s: int = 120, deadline_s: float = 15.0) -> None:
        super().__init__(None, window_s)
        self._window = window_s
        self._deadline = deadline_s
        self._kv: KeyValue | None = None
        self._hub = secrets.token_hex(6)

    async def bind(self, js: JetStreamContext, settings: StreamSettings) -> None:
        """Open the bucket, creating it (replicated like the stream) when it is missing."""
        try:
            self._kv = await js.key_value(settings.nonce_bucket)
        except (NotFoundError, Exception) as exc:
            if not isinstance(exc, NotFoundError) and "not found" not in str(exc).lower():
                raise
            self._kv = await js.create_key_value(
                api.KeyValueConfig(
                    bucket=settings.nonce_bucket,
                    description="bullpen: proof nonces seen by any hub of this room",
                    history=1,
                    ttl=float(2 * self._window),
                    replicas=settings.replicas,
                    storage=api.StorageType.FILE,
                )
            )

    def reserve(self, nonce: str, ts: int) -> bool:
        raise RuntimeError(
            "the shared nonce store is asynchronous: judge posts with `await Gate.admit(...)`"
        )

    async def reserve_async(self, nonce: str, ts: int) -> bool:
        """Record a nonce for every hub; False when any hub already accepted it."""
        if self._kv is None:
            raise DurabilityError("the nonce bucket is not open yet; post again in a moment")
        token = f"{self._hub}-{secrets.token_hex(6)}-{ts}".encode()
        deadline = time.monotonic() + self._deadline
        delay = 0.05
        while True:
            try:
                # Bounded by the deadline, not the API's own (longer) timeout.
                left = max(0.25, deadline - time.monotonic())
                await asyncio.wait_for(self._kv.create(nonce, token), left)
                return True
            except KeyWrongLastSequenceError:
                try:
                    entry = await self._kv.get(nonce)
                except NotFoundError:
                    continue  # it expired in between: try to take it again
                return entry.value == token  # our own earlier attempt landed
            except Exception as exc:  # timeouts, no leader during an election, reconnects
                if time.monotonic() + delay > deadline:
                    raise DurabilityError(
                        f"the nonce store did not answer in {self._deadline:g} s ({exc or type(exc).__name__}); "
                        "nothing was written: post again"
                    ) from None
                log.warning(
                    "nonce store unavailable; retrying", error=str(exc) or type(exc).__name__
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

"""A JetStream room's objects: NATS's own Object Store, on the servers the room uses.

No new server and no hub in the way: a step connects to the room's NATS
servers with the room's settings ([room] servers, credentials; the same
connect as the hub's, room/jetstream/stream.py) and keeps objects in one
bucket (`[objects] bucket`, default `bullpen-objects`, replicated like the
room's stream), each named by the SHA-256 of its bytes. The Object Store
checks its own chunk digest; the reader checks the name as well
(room/objects.py), since anyone with the account's rights can put any bytes
under any name.
"""

from __future__ import annotations

import socket
from dataclasses import replace

import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS
from nats.js import api
from nats.js.object_store import ObjectStore as NatsBucket

from room.jetstream.stream import StreamSettings, connect
from room.objects import Asker, ObjectAltered, ObjectError, ObjectStore

__all__ = ["StreamObjects"]

OPEN_DEADLINE_S = 10.0


class StreamObjects(ObjectStore):
    """Objects in a NATS Object Store bucket; connects on first use, `aclose()` disconnects."""

    def __init__(self, settings: StreamSettings, bucket: str, asker: Asker, max_bytes: int) -> None:
        super().__init__(asker, max_bytes)
        self.settings = replace(settings, connect_deadline_s=OPEN_DEADLINE_S)
        self.bucket = bucket
        self.where = f"the NATS Object Store bucket {bucket} on {', '.join(settings.servers)}"
        self._nc: NATS | None = None
        self._bucket: NatsBucket | None = None

    async def _open(self, name: str) -> NatsBucket:
        if self._bucket is not None:
            return self._bucket
        try:
            self._nc = await connect(self.settings, f"bullpen-objects-{socket.gethostname()}")
            js = self._nc.jetstream()
            try:
                self._bucket = await js.object_store(self.bucket)
            except nats.js.errors.BucketNotFoundError:
                config = api.ObjectStoreConfig(
                    bucket=self.bucket,
                    description="bullpen: what steps hand each other, by SHA-256",
                    replicas=self.settings.replicas,
                )
                self._bucket = await js.create_object_store(self.bucket, config=config)
        except (TimeoutError, nats.errors.Error, OSError) as exc:
            raise self._fail(ObjectError, name, f"NATS did not answer ({exc!r})") from None
        except ObjectError:
            raise
        except Exception as exc:  # a LogError or ConfigError from connect: say it as ours
            raise self._fail(ObjectError, name, getattr(exc, "message", str(exc))) from None
        return self._bucket

    async def aclose(self) -> None:
        if self._nc is not None and not self._nc.is_closed:
            await self._nc.close()

    async def _store(self, name: str, data: bytes) -> None:
        bucket = await self._open(name)
        try:
            await bucket.put(name, data)
        except (TimeoutError, nats.errors.Error) as exc:
            raise self._fail(ObjectError, name, f"NATS did not store it ({exc!r})") from None

    async def _load(self, name: str) -> bytes | None:
        bucket = await self._open(name)
        try:
            info = await bucket.get_info(name)
            if info.size is not None and info.size > self.max_bytes:
                raise self.too_big(name, info.size)
            result = await bucket.get(name)
        except (nats.js.errors.ObjectNotFoundError, nats.js.errors.ObjectDeletedError):
            return None
        except nats.js.errors.NotFoundError:
            return None
        except nats.js.errors.DigestMismatchError:
            raise self._fail(
                ObjectAltered,
                name,
                "its chunks do not match the Object Store's own digest: "
                "it was altered after it was stored, so it was refused",
            ) from None
        except (TimeoutError, nats.errors.Error) as exc:
            raise self._fail(ObjectError, name, f"NATS did not answer ({exc!r})") from None
        return bytes(result.data or b"")

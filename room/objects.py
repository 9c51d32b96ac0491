"""Objects by SHA-256: the one client API every step uses to hand bytes across hosts.

    sha = await store.put(data)     stored under the SHA-256 of its bytes
    data = await store.get(sha)     fetched, and its hash checked against the name

Two engines behind one API, as the room has: a JSONL room's hub keeps them
(room/objectstore.py, `HubObjects` here), a JetStream room keeps them in
NATS's own Object Store (room/jetstream/objects.py). agents/objects.py picks
the one a home's room uses. Both are bounded by `[objects] max_bytes`.

A fetch trusts no one: not the poster that named the object, not the hub's
disk, not the NATS servers. An object that is missing, altered (its bytes do
not hash to its name) or over the bound raises an ObjectError naming the
object, the step, the nick and the host that asked, and where it asked.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import httpx

from room import strictjson
from room.errors import StepFailed
from room.httpverify import verify_tls
from room.message import parse_request_obj
from room.objectnames import OBJECTS_PREFIX, PROOF_HEADER, is_name, proof_post, sha256_of
from trust.proof import Signer

__all__ = [
    "Asker",
    "HubObjects",
    "ObjectAltered",
    "ObjectError",
    "ObjectMissing",
    "ObjectRefused",
    "ObjectStore",
    "ObjectTooBig",
    "is_name",
    "sha256_of",
]


class ObjectError(StepFailed):
    """An object could not be stored or fetched; the message names who asked, where."""

    code = "object"


class ObjectMissing(ObjectError):
    code = "object_missing"


class ObjectAltered(ObjectError):
    code = "object_altered"


class ObjectTooBig(ObjectError):
    code = "object_too_big"


class ObjectRefused(ObjectError):
    code = "object_refused"


@dataclass(frozen=True)
class Asker:
    """Who asks for an object, for the error a failure raises: the nick, its step, its host."""

    nick: str
    step: str
    host: str

    def says(self) -> str:
        return f"@{self.nick} on host {self.host} (step {self.step})"


class ObjectStore:
    """The API: `put(bytes) -> sha256`, `get(sha256) -> bytes`; engines fill in `_store` and
    `_load` (None: no such object)."""

    where = "the object store"

    def __init__(self, asker: Asker, max_bytes: int) -> None:
        self.asker = asker
        self.max_bytes = max_bytes
        self.read_only: str | None = None  # why this store may not be written, if it may not

    async def __aenter__(self) -> ObjectStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        return None

    def _fail(self, kind: type[ObjectError], name: str, what: str) -> ObjectError:
        return kind(f"object {name}, asked by {self.asker.says()} of {self.where}: {what}")

    def too_big(self, name: str, size: int) -> ObjectError:
        return self._fail(
            ObjectTooBig,
            name,
            f"{size} bytes, over the bound of {self.max_bytes} ([objects] max_bytes in "
            "society.toml); nothing was stored. Raise the bound on every host, or hand on less",
        )

    async def put(self, data: bytes) -> str:
        name = sha256_of(data)
        if self.read_only:
            raise self._fail(ObjectRefused, name, f"not stored: {self.read_only}")
        if len(data) > self.max_bytes:
            raise self.too_big(name, len(data))
        await self._store(name, data)
        return name

    async def get(self, name: str) -> bytes:
        if not is_name(name):
            raise ObjectRefused(
                f"{str(name)[:80]!r}, asked by {self.asker.says()}, names no object: a name is "
                "the SHA-256 of the bytes (64 lowercase hex digits)"
            )
        data = await self._load(name)
        if data is None:
            raise self._fail(
                ObjectMissing,
                name,
                "no such object; the step that named it did not store it there (a different "
                "hub or NATS account?), or it was removed",
            )
        if len(data) > self.max_bytes:
            raise self.too_big(name, len(data))
        actual = sha256_of(data)
        if actual != name:
            raise self._fail(
                ObjectAltered,
                name,
                f"its {len(data)} bytes hash to {actual}: the object was altered after it was "
                "stored, so it was refused and nothing was unpacked",
            )
        return data

    async def _store(self, name: str, data: bytes) -> None:
        raise NotImplementedError

    async def _load(self, name: str) -> bytes | None:
        raise NotImplementedError


class HubObjects(ObjectStore):
    """A JSONL room's objects, through its hub's strict listener."""

    def __init__(
        self,
        url: str,
        asker: Asker,
        max_bytes: int,
        *,
        signer: Signer | None,
        token: bytes | None,
        timeout: float = 60.0,
    ) -> None:
        super().__init__(asker, max_bytes)
        self.url = url.rstrip("/")
        self.where = f"the hub at {self.url}"
        headers = {}
        if token:
            headers["authorization"] = f"Bearer {token.decode().strip()}"
        self._signer = signer
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(timeout),
            verify=verify_tls(self.url),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    def _proof(self, name: str, size: int) -> str:
        post = parse_request_obj(proof_post(self.asker.nick, name, size)).post
        payload: dict[str, Any] = post.signed_fields()
        if self._signer is not None:
            payload.update(self._signer.prove(post))
        return base64.urlsafe_b64encode(strictjson.dumps(payload).encode()).decode().rstrip("=")

    async def _store(self, name: str, data: bytes) -> None:
        headers = {PROOF_HEADER: self._proof(name, len(data))}
        try:
            response = await self._http.put(
                f"{OBJECTS_PREFIX}{name}", content=data, headers=headers
            )
        except httpx.TransportError as exc:
            raise self._fail(ObjectError, name, f"the hub did not answer ({exc!r})") from None
        if response.status_code in (200, 201):
            return
        kind = ObjectTooBig if response.status_code == 413 else ObjectRefused
        raise self._fail(kind, name, f"refused ({response.status_code}): {_said(response)}")

    async def _load(self, name: str) -> bytes | None:
        try:
            async with self._http.stream("GET", f"{OBJECTS_PREFIX}{name}") as response:
                if response.status_code == 404:
                    return None
                if response.status_code != 200:
                    await response.aread()
                    raise self._fail(
                        ObjectRefused, name, f"refused ({response.status_code}): {_said(response)}"
                    )
                chunks, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise self.too_big(name, size)
                    chunks.append(chunk)
                return b"".join(chunks)
        except httpx.TransportError as exc:
            raise self._fail(ObjectError, name, f"the hub did not answer ({exc!r})") from None


def _said(response: httpx.Response) -> str:
    try:
        message = response.json().get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message) if message else response.text[:300]

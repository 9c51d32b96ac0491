"""The JSONL hub's object store: what one step hands another across hosts, by SHA-256.

    PUT /objects/{sha256}   verified posters only; the body's hash must be the name
    GET /objects/{sha256}   with the read token (strict) or the endpoint token (relaxed)

A pipeline step on one host hands a step on another a git bundle (a build
dir with its baseline, a green clone) through the room's own engine, not a
shared path: it stores the bytes here and names their SHA-256 in the room
line that hands them on, so the Merkle-logged room vouches for them.

A PUT proves its poster exactly as a post does (trust/gate.py): the header
`X-Bullpen-Proof` holds a post (base64url of its JSON, with its `proof` or
`sig`) from the nick to `@hub`, type `system`, body `PUT /objects/<sha256>`,
data `{"sha256": ..., "bytes": N}`. The gate must find it verified; its
nonce is spent, so a proof stores one object once. The body is streamed to a
private file beside the store, hashed on the way, bounded by `[objects]
max_bytes` (413, nothing stored), compared with its name (400, nothing
stored), fsynced and renamed into place: a reader never sees half an object.
The folder is 0700, each object 0600. An object already stored is kept as it
is (same name, same bytes). Readers check the hash again (room/objects.py):
the hub's disk is not trusted either.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

from room.errors import BadPost, PostRejected, Unauthorized
from room.limits import DiskLow
from room.objectnames import OBJECTS_PREFIX, PROOF_HEADER, is_name, proof_post
from trust.gate import Gate

__all__ = ["OBJECTS_PREFIX", "ObjectFolder", "serve_object"]

MAX_PROOF_HEADER = 4096


class Forbidden(PostRejected):
    """The poster was not verified: it may read objects, never store one."""

    code = "forbidden"
    status = 403


class NotFound(PostRejected):
    code = "not_found"
    status = 404


def _name(path: str) -> str:
    name = path[len(OBJECTS_PREFIX) :]
    if not is_name(name):
        raise BadPost(
            f"{path[:120]!r} names no object: an object's name is the SHA-256 of its bytes, "
            "64 lowercase hex digits (/objects/<sha256>)"
        )
    return name


@dataclass
class ObjectFolder:
    """The hub's folder of objects, one file per SHA-256, and the bound on one object."""

    root: Path
    max_bytes: int
    # the room's low-water mark ([hub] min_free_disk_bytes): an object never takes the disk
    # under it, so objects cannot eat the space the room's posts are kept for
    reserve: int = 0

    def path_of(self, name: str) -> Path:
        return self.root / name

    def ensure(self) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)

    def too_big(self, size: int | str) -> BadPost:
        return BadPost(
            f"the object is {size} bytes, over the bound of {self.max_bytes} bytes "
            "([objects] max_bytes in society.toml); nothing was stored. Hand on less (a "
            "bundle of the commits that matter), or raise the bound on every host",
            status=413,
        )

    def check_room(self, size: int) -> None:
        """Refuse (507) an object that would leave the disk under the reserve."""
        try:
            st = os.statvfs(self.root if self.root.exists() else self.root.parent)
        except OSError:
            return
        free = st.f_bavail * st.f_frsize
        if free - size < self.reserve:
            mib = 1024 * 1024
            raise DiskLow(
                f"the disk under the objects has {free // mib} MiB free; storing {size} bytes "
                f"would leave less than the hub's low-water mark of {self.reserve // mib} MiB "
                "([hub] min_free_disk_bytes), kept for the room's posts; nothing was stored"
            )

    async def receive(self, name: str, request: Request, declared: int) -> None:
        """Stream the body into the folder under `name`. Nothing is left behind, and an
        object already stored under that name is untouched, when it is refused (over the
        bound, not the size its proof declared, a hash that is not its name, a hang-up)."""
        self.ensure()
        temp = self.root / f".incoming-{secrets.token_hex(8)}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        digest, size, done = hashlib.sha256(), 0, False
        try:
            with os.fdopen(fd, "wb") as out:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise self.too_big(f"over {self.max_bytes}")
                    if size > declared:
                        raise _not_declared(declared, f"over {declared}")
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                await asyncio.to_thread(os.fsync, out.fileno())
            if size != declared:
                raise _not_declared(declared, str(size))
            if digest.hexdigest() != name:
                raise BadPost(
                    f"the body's SHA-256 is {digest.hexdigest()}, not {name}: the object's "
                    "name must be the hash of its bytes; nothing was stored"
                )
            await asyncio.to_thread(self._place, temp, name)
            done = True
        finally:
            if not done:
                temp.unlink(missing_ok=True)

    def _place(self, temp: Path, name: str) -> None:
        final = self.path_of(name)
        if final.exists():  # the same name is the same bytes: keep the first
            temp.unlink()
            return
        os.replace(temp, final)
        dir_fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _not_declared(declared: int, size: str) -> BadPost:
    return BadPost(
        f"the proof declared {declared} bytes, the body had {size}; nothing was stored. "
        "Prove the object's exact size"
    )


class ObjectHub(Protocol):
    gate: Gate
    objects: ObjectFolder | None


def _proven(gate: Gate, request: Request, name: str, relaxed: bool) -> tuple[str, Any]:
    """The proof header as the gate's PostRequest, checked to be about this object."""
    from room.message import parse_request

    header = request.headers.get(PROOF_HEADER)
    if not header:
        raise Unauthorized(
            f"PUT {OBJECTS_PREFIX}<sha256> needs the {PROOF_HEADER} header: a post to @hub "
            "proving the nick, as a verified post does (`bullpen docs room`, objects)"
        )
    if len(header) > MAX_PROOF_HEADER:
        raise BadPost(f"the {PROOF_HEADER} header is over {MAX_PROOF_HEADER} characters")
    try:
        raw = base64.urlsafe_b64decode(header.encode("ascii") + b"=" * (-len(header) % 4))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise BadPost(f"the {PROOF_HEADER} header is not base64url") from None
    posted = parse_request(raw, screen=gate.refuse_secrets)
    post = posted.post
    declared = (post.data or {}).get("bytes")
    expected = proof_post(post.from_, name, declared if isinstance(declared, int) else -1)
    if post.signed_fields() != {**expected, "in_reply_to": None, "thread": None}:
        raise BadPost(
            f"the {PROOF_HEADER} post must be to @hub, type system, body "
            f"'PUT {OBJECTS_PREFIX}{name}' and data {{sha256, bytes}} naming this object"
        )
    return post.from_, posted


async def _put(hub: ObjectHub, folder: ObjectFolder, request: Request, relaxed: bool) -> Response:
    name = _name(request.url.path)
    declared_length = request.headers.get("content-length", "")
    if declared_length.isdigit() and int(declared_length) > folder.max_bytes:
        raise folder.too_big(declared_length)  # before the gate spends the nonce
    nick, posted = _proven(hub.gate, request, name, relaxed)
    declared = int(posted.post.data["bytes"])
    if declared > folder.max_bytes:
        raise folder.too_big(declared)
    if not await hub.gate.admit(posted, relaxed):
        raise Forbidden(
            f"@{nick} is not verified: only a privileged nick proving itself (trust.toml "
            "[privileged]) may store objects; nothing was stored"
        )
    folder.check_room(declared)
    await folder.receive(name, request, declared)
    return JSONResponse({"sha256": name, "bytes": declared, "stored_by": nick}, status_code=201)


async def serve_object(hub: ObjectHub, request: Request, relaxed: bool) -> Response:
    """PUT or GET /objects/{sha256} (the listener has checked the relaxed token already)."""
    folder = hub.objects
    if folder is None:
        raise NotFound(
            "this hub keeps no objects: on a JetStream room they are in NATS's Object Store "
            "([objects] bucket), which steps reach with the room's NATS settings"
        )
    if request.method == "PUT":
        return await _put(hub, folder, request, relaxed)
    if request.method != "GET":
        raise BadPost("/objects/<sha256> takes GET or PUT", status=405)
    if not relaxed:
        hub.gate.check_reader(request.headers.get("authorization"))
    name = _name(request.url.path)
    path = folder.path_of(name)
    if not path.is_file():
        raise NotFound(
            f"no object {name} on this hub: the step that named it did not store it here, "
            "or it was removed"
        )
    return FileResponse(path, media_type="application/octet-stream")

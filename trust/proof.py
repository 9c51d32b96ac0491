"""What a poster proves, and how: HMAC with the shared secret or an Ed25519 key.

Both cover the same bytes: the post's signed fields in canonical JSON, then
the proof's timestamp and nonce, each on its own line. The timestamp bounds
a proof's life to the hub's window; the nonce makes each proof single-use.
Any client in any language can rebuild these bytes from docs/room.md.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from room import strictjson
from room.message import Post

if TYPE_CHECKING:  # cryptography is loaded only by processes that sign with a key
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def proof_bytes(signed_fields: dict[str, Any], ts: int, nonce: str) -> bytes:
    return strictjson.canonical(signed_fields) + b"\n" + str(ts).encode() + b"\n" + nonce.encode()


def hmac_hex(secret: bytes, message: bytes) -> str:
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def new_nonce() -> str:
    return secrets.token_hex(16)


class Signer(Protocol):
    """Adds proof material to an outgoing post request."""

    def prove(self, post: Post) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SecretSigner:
    """Proves with the shared secret (HMAC-SHA256)."""

    secret: bytes

    def prove(self, post: Post) -> dict[str, Any]:
        ts, nonce = int(time.time()), new_nonce()
        mac = hmac_hex(self.secret, proof_bytes(post.signed_fields(), ts, nonce))
        return {"proof": {"ts": ts, "nonce": nonce, "hmac": mac}}

    def __repr__(self) -> str:
        return "SecretSigner(<secret>)"


@dataclass(frozen=True)
class KeySigner:
    """Proves with the nick's own Ed25519 key; the signature stays in the line."""

    key: Ed25519PrivateKey

    def prove(self, post: Post) -> dict[str, Any]:
        from trust import keys

        ts, nonce = int(time.time()), new_nonce()
        value = keys.sign(self.key, proof_bytes(post.signed_fields(), ts, nonce))
        return {"sig": {"ts": ts, "nonce": nonce, "value": value}}

    def __repr__(self) -> str:
        return "KeySigner(<key>)"

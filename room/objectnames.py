"""What the object store's server and clients agree on: names, the route, the proof's post.

Apart from both, so the hub loads no HTTP client and a client loads no server
(room/objectstore.py serves, room/objects.py asks).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

__all__ = ["OBJECTS_PREFIX", "PROOF_HEADER", "is_name", "proof_post", "sha256_of"]

OBJECTS_PREFIX = "/objects/"
PROOF_HEADER = "x-bullpen-proof"
_NAME = re.compile(r"[0-9a-f]{64}")


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_name(value: object) -> bool:
    """Whether `value` can name an object (a SHA-256 in lowercase hex)."""
    return isinstance(value, str) and bool(_NAME.fullmatch(value))


def proof_post(nick: str, sha256: str, size: int) -> dict[str, Any]:
    """The post a PUT proves (signed like any post, never stored in the room)."""
    return {
        "from": nick,
        "to": "@hub",
        "type": "system",
        "body": f"PUT {OBJECTS_PREFIX}{sha256}",
        "data": {"sha256": sha256, "bytes": size},
    }

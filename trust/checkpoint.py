"""Signed checkpoints: the hub's word, at a moment, on how long the room was.

The chain lets anyone check that no line was changed *before* the last one;
it cannot tell a cut-off tail from a room that simply ended there, nor a
room rewritten from scratch from the real one. A checkpoint — seq, the hash
of that line, the time — signed with the hub's own Ed25519 key, kept
somewhere else, settles both for every line up to it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from room.errors import ConfigError
from trust import keys


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    head: str
    ts: int
    hub_key: str  # the signer's public key, "ed25519:<base64>"
    sig: str

    def signed_bytes(self) -> bytes:
        return f"bullpen-checkpoint\n{self.seq}\n{self.head}\n{self.ts}".encode()

    def verify(self, public: Ed25519PublicKey) -> bool:
        return keys.verify(public, self.signed_bytes(), self.sig)


def make(key: Ed25519PrivateKey, seq: int, head: str, ts: int | None = None) -> Checkpoint:
    stamp = int(time.time()) if ts is None else ts
    unsigned = Checkpoint(seq, head, stamp, keys.public_text(key), "")
    return Checkpoint(seq, head, stamp, unsigned.hub_key, keys.sign(key, unsigned.signed_bytes()))


def write(path: Path, checkpoint: Checkpoint) -> None:
    """Replace the checkpoint file atomically: write, fsync, rename."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, (json.dumps(asdict(checkpoint)) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def load(path: Path, trusted_key: Ed25519PublicKey | None = None) -> Checkpoint:
    """Read and verify a checkpoint file; raise ConfigError saying what is wrong."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        checkpoint = Checkpoint(
            seq=int(raw["seq"]),
            head=str(raw["head"]),
            ts=int(raw["ts"]),
            hub_key=str(raw["hub_key"]),
            sig=str(raw["sig"]),
        )
    except FileNotFoundError:
        raise ConfigError(f"the checkpoint file {path} does not exist") from None
    except (ValueError, KeyError, TypeError):
        raise ConfigError(
            f"{path} is not a bullpen checkpoint (a JSON object with seq, head, ts, hub_key, sig)"
        ) from None
    public = trusted_key or keys.parse_public(checkpoint.hub_key, str(path))
    if not checkpoint.verify(public):
        raise ConfigError(
            f"the checkpoint {path} is not signed by the hub's key; it was altered or "
            "comes from another hub"
        )
    return checkpoint

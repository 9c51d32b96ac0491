"""Signed notes and tree checkpoints in the C2SP formats, so tools no one here wrote read them.

A checkpoint (C2SP tlog-checkpoint) is the note text

    <origin>\\n<tree size>\\n<base64 root hash>\\n

followed by a blank line and one signature line per signer (C2SP signed-note):

    — <key name> <base64(4-byte key hash ‖ signature)>\\n

The key hash is the first 4 bytes of SHA-256(name ‖ "\\n" ‖ type ‖ public key),
type 0x01 for the log's own Ed25519 signature over the note text, and 0x04
for a witness's timestamped cosignature (C2SP tlog-cosignature), which signs

    cosignature/v1\\ntime <unix seconds>\\n<the note text>

and carries base64(key hash ‖ 8-byte big-endian time ‖ 64-byte signature).
A verifier key is `<name>+<hex key hash>+<base64(type ‖ public key)>`, the
string Go's sumdb `note` package reads.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ED25519 = 0x01
COSIGNATURE = 0x04
DASH = "\u2014 "
MAX_NOTE_BYTES = 1 << 20  # a checkpoint with cosignatures is a few hundred bytes


class NoteError(ValueError):
    """A note, checkpoint or key that does not parse or does not verify; says which and why."""


def _raw(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _check_name(name: str) -> str:
    if not name or any(c.isspace() or c == "+" for c in name) or not name.isprintable():
        raise NoteError(f"a key name must be non-empty, without spaces or '+', got {name!r}")
    return name


def key_hash(name: str, public: Ed25519PublicKey, kind: int = ED25519) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + _raw(public)).digest()[:4]


@dataclass(frozen=True)
class Verifier:
    """One signer's public half, as a verifier key string names it."""

    name: str
    public: Ed25519PublicKey
    kind: int = ED25519

    @property
    def hash(self) -> bytes:
        return key_hash(self.name, self.public, self.kind)

    def text(self) -> str:
        encoded = base64.b64encode(bytes([self.kind]) + _raw(self.public)).decode()
        return f"{self.name}+{self.hash.hex()}+{encoded}"


def parse_verifier(text: str) -> Verifier:
    """A verifier key string; NoteError saying what is wrong with it."""
    parts = text.strip().split("+", 2)  # the base64 key may itself hold a "+"
    if len(parts) != 3:
        raise NoteError(
            "a verifier key looks like NAME+HEXHASH+BASE64 (print the hub's with "
            "`bullpen trust verifier-key`)"
        )
    name, hex_hash, encoded = parts
    _check_name(name)
    try:
        raw = base64.b64decode(encoded, validate=True)
        wanted = bytes.fromhex(hex_hash)
    except (binascii.Error, ValueError):
        raise NoteError("the verifier key's hash is not hex or its key is not base64") from None
    if len(raw) != 33 or raw[0] not in (ED25519, COSIGNATURE):
        raise NoteError(
            "the verifier key is not an Ed25519 key (type 0x01) or a cosignature key (type 0x04)"
        )
    verifier = Verifier(name, Ed25519PublicKey.from_public_bytes(raw[1:]), raw[0])
    if verifier.hash != wanted:
        raise NoteError(f"the verifier key's hash {hex_hash} does not match its name and key")
    return verifier


def verifier_of(name: str, key: Ed25519PrivateKey, kind: int = ED25519) -> Verifier:
    return Verifier(_check_name(name), key.public_key(), kind)


# -- checkpoints ---------------------------------------------------------------


@dataclass(frozen=True)
class TreeHead:
    """What a checkpoint says: this origin's tree had `size` leaves and this root."""

    origin: str
    size: int
    root: bytes

    def body(self) -> str:
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n"


@dataclass(frozen=True)
class SignatureLine:
    name: str
    hash: bytes
    value: bytes  # after the key hash: the signature, or time ‖ signature for a cosignature

    def text(self) -> str:
        return f"{DASH}{self.name} {base64.b64encode(self.hash + self.value).decode()}\n"


@dataclass(frozen=True)
class Note:
    """A signed note: its text (ending in a newline) and its signature lines."""

    text: str
    signatures: list[SignatureLine] = field(default_factory=list)

    def render(self) -> str:
        return self.text + "\n" + "".join(s.text() for s in self.signatures)

    def head(self) -> TreeHead:
        """The checkpoint in the text; NoteError when it is not one."""
        lines = self.text.split("\n")
        if len(lines) < 4 or not lines[0]:
            raise NoteError("the note is not a checkpoint: origin, size and root hash expected")
        origin, size_text, root_text = lines[0], lines[1], lines[2]
        if (
            not size_text.isascii()
            or not size_text.isdigit()
            or (len(size_text) > 1 and size_text[0] == "0")
        ):
            raise NoteError(f"the checkpoint's tree size {size_text[:30]!r} is not a number")
        try:
            root = base64.b64decode(root_text, validate=True)
        except (binascii.Error, ValueError):
            root = b""
        if len(root) != 32:
            raise NoteError("the checkpoint's root hash is not 32 bytes of base64")
        return TreeHead(origin, int(size_text), root)

    def verify(self, verifier: Verifier) -> bool:
        """True when a signature line of this verifier's name and hash verifies."""
        for sig in self.signatures:
            if sig.name != verifier.name or sig.hash != verifier.hash:
                continue
            if verifier.kind == COSIGNATURE:
                if len(sig.value) != 72:
                    continue
                message = cosigned_message(self.text, struct.unpack(">Q", sig.value[:8])[0])
                signature = sig.value[8:]
            else:
                message, signature = self.text.encode(), sig.value
            try:
                verifier.public.verify(signature, message)
            except InvalidSignature:
                continue
            return True
        return False

    def with_signatures(self, extra: list[SignatureLine]) -> Note:
        seen = {s.text() for s in self.signatures}
        return Note(self.text, self.signatures + [s for s in extra if s.text() not in seen])


def parse(text: str) -> Note:
    """A signed note from its text form; NoteError saying what is malformed."""
    if len(text.encode()) > MAX_NOTE_BYTES:
        raise NoteError("the note is over 1 MiB; a checkpoint is a few hundred bytes")
    if "\r" in text:
        raise NoteError("the note holds a carriage return: it was changed in transit (CRLF?)")
    body, blank, sigs = text.partition("\n\n")
    if not blank or not sigs.endswith("\n"):
        raise NoteError(
            "the note has no signature block: text, a blank line, then lines starting '— '"
        )
    signatures = []
    for line in sigs[:-1].split("\n"):
        if not line.startswith(DASH):
            raise NoteError(f"the signature line {line[:40]!r} does not start with '— '")
        name, _, encoded = line[len(DASH) :].partition(" ")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) < 5 or not name:
            raise NoteError(f"the signature line of {name[:40]!r} is not base64 of hash and sig")
        signatures.append(SignatureLine(name, raw[:4], raw[4:]))
    return Note(body + "\n", signatures)


def sign(text: str, name: str, key: Ed25519PrivateKey) -> Note:
    """The log's own signature over a note text (which must end in a newline)."""
    assert text.endswith("\n")
    verifier = verifier_of(name, key)
    return Note(text, [SignatureLine(name, verifier.hash, key.sign(text.encode()))])


def cosigned_message(text: str, when: int) -> bytes:
    return f"cosignature/v1\ntime {when}\n".encode() + text.encode()


def cosign(text: str, name: str, key: Ed25519PrivateKey, when: int) -> SignatureLine:
    """A witness's tlog-cosignature/v1 line over a checkpoint's text."""
    verifier = verifier_of(name, key, COSIGNATURE)
    value = struct.pack(">Q", when) + key.sign(cosigned_message(text, when))
    return SignatureLine(name, verifier.hash, value)

"""Ed25519 keys: per-nick keys for authorship, and the hub's checkpoint key.

A private key is a PEM (PKCS#8) file created 0600; a public key is written as
`ed25519:<base64 of the raw 32 bytes>` so it fits on one line of trust.toml.
"""

from __future__ import annotations

import base64
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from room.errors import ConfigError, SecretFileError
from trust.secretfiles import create_secret_file, read_secret_file

PUBLIC_PREFIX = "ed25519:"


def generate_private_key(path: Path) -> Ed25519PrivateKey:
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    create_secret_file(path, pem)
    return key


def load_private_key(path: Path, fix: str | None = None) -> Ed25519PrivateKey:
    """A nick's key, `<key_dir>/<nick>.key`; a missing one is made with `bullpen keys new`.

    `fix` says what to do about a bad file when that is not `bullpen keys new`
    (the hub's own key, trust/hubkey.py, which also never reaches here missing).
    """
    fix = fix or f"make a new one with `bullpen keys new {path.stem}`"
    if not path.exists() and not path.is_symlink():
        nick = path.stem
        raise SecretFileError(
            f"the private key file {path} does not exist; make it with `bullpen keys new "
            f"{nick}` and put the line it prints under [privileged] in trust.toml in place "
            f"of {nick}'s (then restart the hub), or point key_dir in trust.toml at the "
            "folder that holds it",
            path=str(path),
        )
    pem = read_secret_file(path, "private key file")
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError):
        raise SecretFileError(
            f"the private key file {path} is not an unencrypted PEM private key; {fix}",
            path=str(path),
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SecretFileError(
            f"the private key file {path} is not an Ed25519 key; {fix}", path=str(path)
        )
    return key


def public_text(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PUBLIC_PREFIX + base64.b64encode(raw).decode("ascii")


def parse_public(text: str, where: str) -> Ed25519PublicKey:
    if not text.startswith(PUBLIC_PREFIX):
        raise ConfigError(f"{where}: a public key must look like 'ed25519:<base64>'")
    try:
        raw = base64.b64decode(text.removeprefix(PUBLIC_PREFIX), validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise ConfigError(
            f"{where}: the public key is not 32 bytes of valid base64; copy it again from "
            "`bullpen keys show NICK`"
        ) from None


def sign(key: Ed25519PrivateKey, message: bytes) -> str:
    return base64.b64encode(key.sign(message)).decode("ascii")


def verify(public: Ed25519PublicKey, message: bytes, signature_b64: str) -> bool:
    try:
        raw = base64.b64decode(signature_b64, validate=True)
        public.verify(raw, message)
    except (InvalidSignature, ValueError):
        return False
    return True

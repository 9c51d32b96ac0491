"""trust.toml: the one table both listeners read.

PRIVILEGED maps a nick to how it proves itself ("secret" or an Ed25519
public key); the hub stamps `verified` only for those nicks. TRUST is the
invoker allowlist lurkers apply. TRUST does not include PRIVILEGED by
itself: a trusted-but-unprivileged nick can ask, but its replies are never
verified, so nobody that requires verified will consume them.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from room.errors import ConfigError
from room.message import is_nick

if TYPE_CHECKING:  # cryptography is loaded only when the table names a public key
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

SECRET = "secret"
PUBLIC_PREFIX = "ed25519:"


@dataclass(frozen=True)
class Proof:
    """How one privileged nick proves itself."""

    method: str  # "secret" or "key"
    public_key: Ed25519PublicKey | None = None
    public_text: str | None = None


@dataclass(frozen=True)
class TrustTable:
    path: Path
    privileged: dict[str, Proof]
    trusted: frozenset[str]
    secret_file: Path
    relaxed_token_file: Path
    hub_key_file: Path
    key_dir: Path
    # The strict listener's /read asks for it (a home from before it had none:
    # the hub creates it on start, docs/operating.md).
    read_token_file: Path = Path("secrets/read-token")
    public_keys: dict[str, Ed25519PublicKey] = field(default_factory=dict)
    hub_public_text: str | None = None

    @property
    def hub_public_key(self) -> Ed25519PublicKey | None:
        """The hub's checkpoint key, parsed on demand (auditors need it, lurkers do not)."""
        if self.hub_public_text is None:
            return None
        from trust import keys

        return keys.parse_public(self.hub_public_text, f"{self.path}: hub_public_key")

    def is_privileged(self, nick: str) -> bool:
        return nick in self.privileged

    def is_trusted(self, nick: str) -> bool:
        return nick in self.trusted

    def proof_of(self, nick: str) -> Proof | None:
        return self.privileged.get(nick)

    def key_file(self, nick: str) -> Path:
        return self.key_dir / f"{nick}.key"


def digest(path: Path) -> str:
    """A short fingerprint of trust.toml's bytes: /health shows the one the hub holds."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _checked_public(text: str | None, where: str) -> str | None:
    """Check a public key's form without loading cryptography: 32 bytes of base64."""
    import base64
    import binascii

    if text is None:
        return None
    try:
        raw = base64.b64decode(text.removeprefix(PUBLIC_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not text.startswith(PUBLIC_PREFIX) or len(raw) != 32:
        raise ConfigError(f"{where}: a public key must look like 'ed25519:<base64 of 32 bytes>'")
    return text


def load(path: Path) -> TrustTable:
    """Read trust.toml, or raise ConfigError saying which line to fix."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist; create a home with `bullpen init DIR`") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    base = path.parent
    known = {
        "secret_file",
        "relaxed_token_file",
        "read_token_file",
        "hub_key_file",
        "hub_public_key",
        "key_dir",
        "trusted",
        "privileged",
    }
    for key in raw:
        if key not in known:
            raise ConfigError(
                f"{path}: unknown key {key!r}; known keys are {', '.join(sorted(known))}"
            )

    def _path(key: str, default: str) -> Path:
        value = raw.get(key, default)
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{path}: {key} must be a file path")
        # Normalized, not resolved: resolving would follow a symlinked secret file to
        # its target, and the secret-file checks (O_NOFOLLOW) would never see the link.
        return Path(os.path.normpath(base / value))

    trusted_raw = raw.get("trusted", [])
    if not isinstance(trusted_raw, list) or not all(isinstance(n, str) for n in trusted_raw):
        raise ConfigError(f'{path}: trusted must be a list of nicks, like ["operator"]')
    for nick in trusted_raw:
        if not is_nick(nick):
            raise ConfigError(f"{path}: trusted lists {nick!r}, which is not a valid nick")

    privileged: dict[str, Proof] = {}
    public_keys: dict[str, Ed25519PublicKey] = {}
    section = raw.get("privileged", {})
    if not isinstance(section, dict):
        raise ConfigError(
            f'{path}: [privileged] must be a table of nick = "secret" | "ed25519:..."'
        )
    for nick, how in section.items():
        where = f"{path}: privileged.{nick}"
        if not is_nick(nick):
            raise ConfigError(f"{where}: {nick!r} is not a valid nick")
        if how == SECRET:
            privileged[nick] = Proof(SECRET)
        elif isinstance(how, str) and how.startswith(PUBLIC_PREFIX):
            from trust import keys

            public = keys.parse_public(how, where)
            privileged[nick] = Proof("key", public, how)
            public_keys[nick] = public
        else:
            raise ConfigError(
                f'{where}: must be "secret" (the shared secret) or "ed25519:<base64>" '
                "(the nick's own public key, from `bullpen keys new NICK`)"
            )
    hub_public = raw.get("hub_public_key")
    if hub_public is not None and not isinstance(hub_public, str):
        raise ConfigError(f"{path}: hub_public_key must be a string 'ed25519:<base64>'")
    return TrustTable(
        path=path,
        privileged=privileged,
        trusted=frozenset(trusted_raw),
        secret_file=_path("secret_file", "secrets/post-secret"),
        relaxed_token_file=_path("relaxed_token_file", "secrets/relaxed-token"),
        hub_key_file=_path("hub_key_file", "secrets/hub.key"),
        key_dir=_path("key_dir", "secrets/keys"),
        read_token_file=_path("read_token_file", "secrets/read-token"),
        public_keys=public_keys,
        hub_public_text=_checked_public(hub_public, f"{path}: hub_public_key"),
    )

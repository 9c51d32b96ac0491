"""The hub's own Ed25519 key: it signs checkpoints, so it must be the one trust.toml names.

A hub that silently made or used another key would sign checkpoints that no
audit accepts — found only the day someone needs them. So a missing key is
made only while trust.toml names none, and a key that does not match
`hub_public_key` stops the hub (exit 78) with the way out.
"""

from __future__ import annotations

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from room.errors import BullpenError, SecretFileError
from trust import keys
from trust.table import TrustTable

log = structlog.get_logger("trust.hubkey")


def load(trust: TrustTable) -> Ed25519PrivateKey:
    """The hub's key, made on first start if trust.toml names none; else it must match."""
    path = trust.hub_key_file
    if not path.exists() and not path.is_symlink():
        if trust.hub_public_text is not None:
            raise SecretFileError(
                f"the hub's key file {path} is missing, but trust.toml's hub_public_key names "
                "the key checkpoints are checked against. Restore the file from a backup; or, "
                "to start a new key, delete hub_public_key from trust.toml and start the hub "
                "(it makes a key and logs its public half to put back under hub_public_key). "
                "Checkpoints signed by the old key then no longer verify",
                path=str(path),
            )
        key = keys.generate_private_key(path)
        log.warning(
            "made a new hub key; add its public half to trust.toml so audits can check checkpoints",
            hub_public_key=keys.public_text(key),
        )
        return key
    key = keys.load_private_key(
        path,
        fix="restore it from a backup, or delete it and hub_public_key from trust.toml to let "
        "the hub make a new one",
    )
    if trust.hub_public_text is not None and keys.public_text(key) != trust.hub_public_text:
        raise SecretFileError(
            f"the hub's key file {path} holds {keys.public_text(key)}, but trust.toml's "
            f"hub_public_key is {trust.hub_public_text}: checkpoints signed with it would not "
            "verify. Put the right key file back, or, if this key is the one to keep, set "
            "hub_public_key to its public half",
            path=str(path),
        )
    return key


def problem(trust: TrustTable) -> str | None:
    """What `load` would refuse, for the trust check; never creates a key."""
    path = trust.hub_key_file
    if not path.exists() and not path.is_symlink() and trust.hub_public_text is None:
        return None  # the hub makes it on first start
    try:
        load(trust)
    except BullpenError as exc:
        return exc.message
    return None

"""Caller tokens: one per nick, a 0600 file under the home's secrets/gateway/.

`bullpen gateway token NICK` issues one (trust/secretfiles.py: created
0600, never through a link, never over an existing file). The gateway
reads them all at start; a request's `Authorization: Bearer` token is
looked up by its SHA-256, so the table in memory holds no token, and every
token read is registered with the log scrubber.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import TYPE_CHECKING

from room.errors import BullpenError, ConfigError, UsageError
from room.logs import register_secret
from room.message import check_nick
from trust.secretfiles import create_secret_file, ensure_private_dir, new_secret, read_secret_text

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["CallerTokens", "Unauthorized", "issue"]


class Unauthorized(BullpenError):
    """No caller token, or one the gateway does not know (401)."""

    code = "unauthorized"
    status = 401


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


def issue(home: Home, nick: str) -> Path:
    """Write a new token for `nick`; ConfigError if it already has one."""
    try:
        check_nick(nick, "nick")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    path = home.gateway_token_file(nick)
    if path.exists():
        raise ConfigError(
            f"{nick} already has a gateway token ({path}); remove that file first to issue "
            "a new one, then restart the gateway"
        )
    create_secret_file(path, new_secret() + "\n")
    return path


class CallerTokens:
    """Who holds which token: read from the token files at start."""

    def __init__(self, by_digest: dict[bytes, str]) -> None:
        self._by_digest = by_digest

    @classmethod
    def load(cls, home: Home) -> CallerTokens:
        folder = home.gateway_token_dir()
        ensure_private_dir(folder)
        found: dict[bytes, str] = {}
        for path in sorted(folder.glob("*.token")):
            token = read_secret_text(path, "gateway token file")
            register_secret(token)
            found[_digest(token)] = path.stem
        return cls(found)

    def __len__(self) -> int:
        return len(self._by_digest)

    def caller(self, authorization: str | None) -> str:
        """The nick whose token the header carries, or Unauthorized saying what to send."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized(
                "no caller token: send `Authorization: Bearer <token>` with the token "
                "`bullpen gateway token NICK` wrote for you"
            )
        digest = _digest(token.strip().encode())
        for known, nick in self._by_digest.items():
            if hmac.compare_digest(known, digest):
                return nick
        raise Unauthorized(
            "the caller token is not one this gateway issued; use the file "
            "`bullpen gateway token NICK` wrote (secrets/gateway/NICK.token)"
        )

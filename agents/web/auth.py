"""Who may see the web view: one token file, one-time login links, signed session cookies.

    secrets/web-token      256 random bits (0600), made on first use
    /login?n=&e=&t=        a link `bullpen web url` prints: HMAC(token, nonce, expiry),
                           good once and for LINK_TTL_S; it sets the session cookie
    bullpen_session        HttpOnly, SameSite=Strict: issued-at, random id, HMAC
    csrf                   HMAC(token, "csrf", session): every form carries it

A session is good when the token signed its cookie *and* its id is still
in the session file (agents/web/sessions.py), where each login records the
link it spent before the cookie is sent: a restart neither revives a spent
link nor a session that logged out. Replacing the token file ends every
session and link at once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from agents.web.sessions import SessionStore
from room.logs import register_secret
from trust.secretfiles import ensure_secret_text

COOKIE = "bullpen_session"
LINK_TTL_S = 600.0
SESSION_TTL_S = 7 * 24 * 3600.0


def token_file(home_root: Path) -> Path:
    return home_root / "secrets" / "web-token"


def load_token(home_root: Path) -> bytes:
    """The web token (made now, 0600, when the home has none); scrubbed from every log."""
    value, _ = ensure_secret_text(token_file(home_root), "web token file")
    register_secret(value)
    return value.strip()


def _mac(key: bytes, *parts: str) -> str:
    return hmac.new(key, "\x1f".join(parts).encode(), hashlib.sha256).hexdigest()


def login_query(key: bytes, now: float | None = None) -> str:
    """The query of a fresh one-time login link."""
    nonce = secrets.token_hex(16)
    expires = str(int((now if now is not None else time.time()) + LINK_TTL_S))
    return urlencode({"n": nonce, "e": expires, "t": _mac(key, "login", nonce, expires)})


@dataclass
class Auth:
    """Checks links, sessions and CSRF tokens against the token and the session file."""

    key: bytes
    store: SessionStore = field(default_factory=lambda: SessionStore(None))  # server: a file

    def redeem(self, nonce: str, expires: str, tag: str, now: float | None = None) -> str | None:
        """A new session cookie value for a good, unused, unexpired link; None otherwise.
        The link is spent and the session recorded on disk before this returns."""
        now = time.time() if now is None else now
        if not (nonce and expires.isdigit() and tag):
            return None
        if not hmac.compare_digest(tag, _mac(self.key, "login", nonce, expires)):
            return None
        if int(expires) < now:
            return None
        issued, sid = str(int(now)), secrets.token_hex(16)
        if not self.store.grant(nonce, int(expires), sid, int(now + SESSION_TTL_S), int(now)):
            return None  # spent already
        return f"{issued}.{sid}.{_mac(self.key, 'session', issued, sid)}"

    def session(self, cookie: str | None, now: float | None = None) -> str | None:
        """The cookie when this token signed it, it has not expired and it was not ended."""
        if not cookie or cookie.count(".") != 2:
            return None
        issued, sid, tag = cookie.split(".")
        if not issued.isdigit() or not hmac.compare_digest(
            tag, _mac(self.key, "session", issued, sid)
        ):
            return None
        now = time.time() if now is None else now
        if now - int(issued) >= SESSION_TTL_S or not self.store.live(sid, int(now)):
            return None
        return cookie

    def end(self, session: str) -> None:
        """Log a session out: its cookie is refused from now on, across restarts too."""
        self.store.revoke(session.split(".")[1])

    def csrf(self, session: str) -> str:
        return _mac(self.key, "csrf", session)

    def csrf_ok(self, session: str, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(str(given), self.csrf(session))

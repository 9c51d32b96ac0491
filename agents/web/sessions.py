"""The web view's login state on disk: the links already spent and the sessions still live.

    state/web-sessions.sqlite   0600, synchronous = FULL (every commit is fsynced)

A login records the link's nonce and the session it opens in one
transaction that is on disk before the cookie is handed out, so a restart
(or a power loss) never revives a spent link. A session is good only while
its row is here: logging out deletes it, and the cookie then reads nothing,
before a restart or after. Rows past their expiry are pruned at each login
(spent links a day later), so the file stays small.

The cookie stays signed (agents/web/auth.py): a row alone grants nothing,
so whoever can write this file can end sessions but not open one.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from room.errors import ConfigError

__all__ = ["SessionStore", "store_file"]

PRUNE_MARGIN_S = 24 * 3600
SCHEMA = """
CREATE TABLE IF NOT EXISTS spent (nonce TEXT PRIMARY KEY, expires INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (sid TEXT PRIMARY KEY, expires INTEGER NOT NULL);
"""


def store_file(home_root: Path) -> Path:
    return home_root / "state" / "web-sessions.sqlite"


def _create_private(path: Path) -> None:
    """The file, made 0600 without following a link; refused when it is not a plain file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ConfigError(
            f"the web view cannot open its session file {path} ({exc.strerror}); remove what "
            "is there (a link or a folder) and start it again"
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"{path} is not a regular file; remove it and start again")
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


class SessionStore:
    """One connection to the session file, used from the web view's event loop."""

    def __init__(self, path: Path | None) -> None:
        """The store in the file at `path`; None keeps it in memory (a test's, or a
        library user's: a restart then forgets it, so `bullpen web` always gives a file)."""
        if path is not None:
            _create_private(path)
        self.path = path
        try:
            self.db = sqlite3.connect(path or ":memory:", isolation_level=None, timeout=5.0)
            self.db.execute("PRAGMA journal_mode = DELETE")
            self.db.execute("PRAGMA synchronous = FULL")
            self.db.executescript(SCHEMA)
        except sqlite3.Error as exc:
            raise ConfigError(
                f"the web view's session file {path} cannot be used ({exc}); move it aside "
                "and start again (every session then logs in anew)"
            ) from None

    def grant(
        self, nonce: str, link_expires: int, sid: str, session_expires: int, now: int
    ) -> bool:
        """Spend `nonce` and open session `sid`, durably, in one transaction; False (nothing
        written) when the nonce was spent already."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            # a spent link is kept a day past its expiry, so a clock set back cannot revive it
            db.execute("DELETE FROM spent WHERE expires < ?", (now - PRUNE_MARGIN_S,))
            db.execute("DELETE FROM sessions WHERE expires < ?", (now,))
            fresh = db.execute(
                "INSERT OR IGNORE INTO spent(nonce, expires) VALUES (?, ?)", (nonce, link_expires)
            ).rowcount
            if fresh:
                db.execute(
                    "INSERT INTO sessions(sid, expires) VALUES (?, ?)", (sid, session_expires)
                )
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")  # synchronous = FULL: on disk before the cookie leaves
        return bool(fresh)

    def live(self, sid: str, now: int) -> bool:
        row = self.db.execute(
            "SELECT 1 FROM sessions WHERE sid = ? AND expires >= ?", (sid, now)
        ).fetchone()
        return row is not None

    def revoke(self, sid: str) -> None:
        """End one session (a commit: on disk before the logout page is sent)."""
        self.db.execute("DELETE FROM sessions WHERE sid = ?", (sid,))

    def close(self) -> None:
        self.db.close()

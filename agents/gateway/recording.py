"""What the gateway answered, kept by request digest, so a run can be replayed with no backend.

With `[gateway] record = true` every chat completion the gateway answers
(200, not streamed) is stored as: the SHA-256 of the request body as the
caller sent it (canonical JSON; a body holds no token: the caller's token
is a header, and any `api_key`/`user` field is removed first) → the answer.
An answer that holds a secret of the home (trust/screen.py) is not stored.
The file is a small sqlite database in the home's state/, 0600.
`bullpen replay --offline` (agents/replay/offline.py) answers from it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from room.errors import SecretFound

if TYPE_CHECKING:
    from agents.home import Home
    from trust.screen import HomeSecrets, Screen

log = structlog.get_logger("agents.gateway.recording")

RECORDING = "state/gateway/recording.sqlite"
NOT_DIGESTED = ("api_key", "user")  # never part of the digest (nor stored: only the digest is)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS answers (digest TEXT PRIMARY KEY, model TEXT NOT NULL, "
    "answer TEXT NOT NULL)"
)


def recording_path(home: Home) -> Path:
    return home.path(RECORDING)


def request_digest(body: dict[str, Any]) -> str:
    """The digest of a chat-completions request body, as the caller sent it."""
    kept = {k: v for k, v in body.items() if k not in NOT_DIGESTED}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@contextlib.contextmanager
def _connect(path: Path, *, write: bool) -> Iterator[sqlite3.Connection]:
    if write:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))  # 0600 before sqlite opens it
        connection = sqlite3.connect(path, timeout=10)
    else:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        yield connection
    finally:
        connection.close()


class Recorder:
    """The gateway's side: store an answer under its request's digest."""

    def __init__(self, path: Path, screen: Screen | HomeSecrets) -> None:
        self.path = path
        self.screen = screen
        with _connect(path, write=True) as db:
            db.execute(_SCHEMA)
            db.commit()

    @classmethod
    def of(cls, home: Home) -> Recorder:
        return cls(recording_path(home), home.screen)

    def save(self, digest: str, model: str, answer: dict[str, Any]) -> bool:
        """Store the answer (True), or not when it holds a secret or the file cannot be
        written (False: logged, not raised — the caller still gets its answer; a replay of it
        will say it has no recording)."""
        try:
            self.screen.check_json(answer, "a recorded gateway answer")
        except SecretFound:
            log.warning("answer not recorded: it holds a secret of the home", model=model)
            return False
        text = json.dumps(answer, ensure_ascii=False)
        try:
            with _connect(self.path, write=True) as db:
                db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?)", (digest, model, text))
                db.commit()
        except (sqlite3.Error, OSError) as exc:  # the caller still gets its answer
            log.warning("answer not recorded", model=model, error=str(exc), path=str(self.path))
            return False
        return True


class Recording:
    """The replay's side: the answer recorded for a digest, read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def answer(self, digest: str) -> dict[str, Any] | None:
        with _connect(self.path, write=False) as db:
            row = db.execute("SELECT answer FROM answers WHERE digest = ?", (digest,)).fetchone()
        return json.loads(row[0]) if row else None

    def __len__(self) -> int:
        with _connect(self.path, write=False) as db:
            return int(db.execute("SELECT count(*) FROM answers").fetchone()[0])

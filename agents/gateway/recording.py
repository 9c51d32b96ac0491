"""What the gateway answered, kept by caller, run and request digest, so a run can be
replayed with no backend.

With `[gateway] record = true` every chat completion the gateway answers
(200, not streamed) is stored under three keys:

- the caller: the nick whose caller token the request carried (never the
  token; a caller cannot claim another's nick);
- the run: the `x-bullpen-run` header a seat sends (the thread of the step
  it answers, agents/seats/request.py), else, for other clients, the SHA-256
  of the body's `user` field (the OpenAI field naming an end user), else
  nothing;
- the SHA-256 of the request body as the caller sent it (canonical JSON; a
  body holds no token: the caller's token is a header, and any
  `api_key`/`user` field is removed first).

The first answer stored under a key stays: a later one is not written over
it (`INSERT OR IGNORE` on the key), so another caller's identical request, or
one that differs only in `user` or names someone else's run, cannot change
what `bullpen replay --offline` (agents/replay/offline.py) serves for a
step (issue 33: the digest alone was the key, and the last writer won).

An answer that holds a secret of the home (trust/screen.py) is not stored.
The file is a small sqlite database in the home's state/, 0600. Its format
is `PRAGMA user_version` (FORMAT, 2); version 1 (no version set: one table
`answers` keyed by digest alone) is still read, as the answer for any caller
and run when the new table has none, and never written again; a file from a
newer bullpen is refused with what to do.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from room.errors import SecretFound, UsageError

if TYPE_CHECKING:
    from agents.home import Home
    from trust.screen import HomeSecrets, Screen

log = structlog.get_logger("agents.gateway.recording")

RECORDING = "state/gateway/recording.sqlite"
FORMAT = 2
RUN_HEADER = "x-bullpen-run"
NOT_DIGESTED = ("api_key", "user")  # never part of the digest (nor stored: only the digest is)
_RUN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,127}")  # a room thread (room/message.py)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS recorded (caller TEXT NOT NULL, run TEXT NOT NULL, "
    "digest TEXT NOT NULL, model TEXT NOT NULL, answer TEXT NOT NULL, "
    "PRIMARY KEY (caller, run, digest))"
)


@dataclass(frozen=True)
class RecordKey:
    """Whose answer, in which run, to which request."""

    caller: str
    run: str
    digest: str

    @classmethod
    def of(cls, caller: str, run_header: str | None, body: dict[str, Any]) -> RecordKey:
        """The key of a request as the gateway received it (see the module docstring)."""
        if run_header is not None:
            if not _RUN.fullmatch(run_header):
                from agents.gateway.body import BadRequest  # starlette: the gateway's side only

                raise BadRequest(
                    f"the {RUN_HEADER} header must be a run's thread: 1-128 letters, digits "
                    "and ._:@/+- starting with a letter or digit"
                )
            run = run_header
        elif isinstance(body.get("user"), str):
            run = "user:" + hashlib.sha256(body["user"].encode("utf-8")).hexdigest()
        else:
            run = ""
        return cls(caller, run, request_digest(body))


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
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        if version > FORMAT:
            raise UsageError(
                f"the gateway recording {path} has format {version}, newer than this bullpen "
                f"reads ({FORMAT}): upgrade bullpen, or move the file aside to start a new one"
            )
        yield connection
    finally:
        connection.close()


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


class Recorder:
    """The gateway's side: store an answer under its key, never over an earlier one."""

    def __init__(self, path: Path, screen: Screen | HomeSecrets) -> None:
        self.path = path
        self.screen = screen
        with _connect(path, write=True) as db:
            db.execute(_SCHEMA)
            db.execute(f"PRAGMA user_version = {FORMAT}")
            db.commit()

    @classmethod
    def of(cls, home: Home) -> Recorder:
        return cls(recording_path(home), home.screen)

    def save(self, key: RecordKey, model: str, answer: dict[str, Any]) -> bool:
        """Store the answer (True), or not (False, logged, never raised: the caller still
        gets its answer) when it holds a secret, the file cannot be written, or the key
        has an answer already (the first writer's stays)."""
        try:
            self.screen.check_json(answer, "a recorded gateway answer")
        except SecretFound:
            log.warning("answer not recorded: it holds a secret of the home", model=model)
            return False
        text = json.dumps(answer, ensure_ascii=False)
        row = (key.caller, key.run, key.digest, model, text)
        try:
            with _connect(self.path, write=True) as db:
                stored = db.execute("INSERT OR IGNORE INTO recorded VALUES (?, ?, ?, ?, ?)", row)
                db.commit()
        except (sqlite3.Error, OSError, UsageError) as exc:  # the caller still gets its answer
            log.warning("answer not recorded", model=model, error=str(exc), path=str(self.path))
            return False
        if stored.rowcount == 0:
            log.info("answer not recorded: this caller's run has one already", caller=key.caller)
            return False
        return True


class Recording:
    """The replay's side: the answer recorded for a key, read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def answer(self, caller: str, run: str, digest: str) -> dict[str, Any] | None:
        """The caller's answer in that run; else a format-1 answer to the same digest."""
        with _connect(self.path, write=False) as db:
            tables = _tables(db)
            row = None
            if "recorded" in tables:
                row = db.execute(
                    "SELECT answer FROM recorded WHERE caller = ? AND run = ? AND digest = ?",
                    (caller, run, digest),
                ).fetchone()
            if row is None and "answers" in tables:  # format 1: keyed by digest alone
                row = db.execute(
                    "SELECT answer FROM answers WHERE digest = ?", (digest,)
                ).fetchone()
        return json.loads(row[0]) if row else None

    def __len__(self) -> int:
        with _connect(self.path, write=False) as db:
            tables = _tables(db) & {"recorded", "answers"}
            return sum(int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables)

"""The gateway's recording on its own: digests ignore what is not the request, secrets are
never stored, the file is 0600, a miss is None, answers are kept per caller and run with the
first writer's kept, and a format-1 recording is still read."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from agents.gateway.body import BadRequest
from agents.gateway.recording import Recorder, Recording, RecordKey, request_digest
from room.errors import UsageError
from trust.screen import Screen

SECRET = "s3cr3t-" + "x" * 40


def test_digest_is_canonical_and_leaves_out_api_key_and_user() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
    same = {"temperature": 0, "messages": [{"content": "hi", "role": "user"}], "model": "m"}
    assert request_digest(body) == request_digest(same)
    assert request_digest(body) == request_digest({**body, "api_key": "k", "user": "u"})
    assert request_digest(body) != request_digest({**body, "model": "other"})


def test_answers_are_kept_0600_and_a_secret_is_never_stored(tmp_path: Path) -> None:
    path = tmp_path / "state" / "gateway" / "recording.sqlite"
    recorder = Recorder(path, Screen.of([(SECRET, "a test secret")]))
    answer = {"choices": [{"message": {"content": '{"terms": ["a"]}'}}]}
    assert recorder.save(RecordKey("termgen", "run-1", "d1"), "m", answer) is True
    leaked = {"choices": [{"message": {"content": f"the key is {SECRET}"}}]}
    assert recorder.save(RecordKey("termgen", "run-1", "d2"), "m", leaked) is False
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    recording = Recording(path)
    assert recording.answer("termgen", "run-1", "d1") == answer
    assert recording.answer("termgen", "run-1", "d2") is None
    assert len(recording) == 1 and SECRET.encode() not in path.read_bytes()


def _answer(text: str) -> dict:
    return {"choices": [{"message": {"content": text}}]}


def test_each_caller_and_run_keeps_its_own_answer_and_the_first_writer_wins(
    tmp_path: Path,
) -> None:
    path = tmp_path / "recording.sqlite"
    recorder = Recorder(path, Screen())
    body = {"model": "m", "messages": [{"role": "user", "content": "step: terms"}]}
    mine = RecordKey.of("termgen", "exp-1", body)
    assert recorder.save(mine, "m", _answer("mine")) is True
    assert recorder.save(mine, "m", _answer("again")) is False  # first writer wins
    theirs = RecordKey.of("mallory", "exp-1", body)  # claims the run; its own caller still
    assert recorder.save(theirs, "m", _answer("poison")) is True
    by_user = RecordKey.of("termgen", None, {**body, "user": "someone"})
    assert by_user.run.startswith("user:") and "someone" not in by_user.run
    assert recorder.save(by_user, "m", _answer("user's")) is True
    recording = Recording(path)
    assert recording.answer("termgen", "exp-1", mine.digest) == _answer("mine")
    assert recording.answer("mallory", "exp-1", mine.digest) == _answer("poison")
    assert recording.answer("termgen", "exp-2", mine.digest) is None
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    with pytest.raises(BadRequest):
        RecordKey.of("termgen", "../../etc", body)


def test_a_format_1_recording_is_still_read_and_never_written(tmp_path: Path) -> None:
    """A recording made before issue 33 (table `answers`, digest alone) answers any caller
    and run; new answers go to the new table, and a newer format is refused."""
    path = tmp_path / "recording.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE answers (digest TEXT PRIMARY KEY, model TEXT NOT NULL, answer TEXT NOT NULL)"
        )
        db.execute("INSERT INTO answers VALUES ('d-old', 'm', '{\"old\": true}')")
    assert Recording(path).answer("anyone", "any-run", "d-old") == {"old": True}
    recorder = Recorder(path, Screen())
    assert recorder.save(RecordKey("termgen", "r", "d-old"), "m", _answer("new")) is True
    recording = Recording(path)
    assert recording.answer("termgen", "r", "d-old") == _answer("new")
    assert recording.answer("other", "r", "d-old") == {"old": True}
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM answers").fetchone()[0] == 1
        db.execute("PRAGMA user_version = 3")
    with pytest.raises(UsageError, match="newer than this bullpen"):
        Recording(path).answer("termgen", "r", "d-old")

"""The gateway's recording on its own: digests ignore what is not the request, secrets are
never stored, the file is 0600, and a miss is None."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agents.gateway.recording import Recorder, Recording, request_digest
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
    assert recorder.save("d1", "m", answer) is True
    leaked = {"choices": [{"message": {"content": f"the key is {SECRET}"}}]}
    assert recorder.save("d2", "m", leaked) is False
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    recording = Recording(path)
    assert recording.answer("d1") == answer and recording.answer("d2") is None
    assert len(recording) == 1 and SECRET.encode() not in path.read_bytes()

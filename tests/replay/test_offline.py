"""Recordings: `[gateway] record = true` keeps each answer by request digest, and `replay
--offline` answers from them with no backend request at all."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.gateway.recording import Recording, request_digest
from agents.gateway.tokens import issue
from tests.fakes.expedition_model import TERMS
from tests.fakes.fake_openai import FakeOpenAI
from tests.gateway.helpers import gateway_section
from tests.replay.conftest import EXPEDITION, thread_from
from tests.support import (
    EXPEDITION_LURKERS,
    HTTP,
    Society,
    free_port,
    run_cli,
    set_seat,
    start_up,
)


@pytest.fixture
def backend() -> Iterator[FakeOpenAI]:
    with FakeOpenAI({"termgen": json.dumps({"terms": TERMS})}) as server:
        yield server


def recorded_digests(path: Path) -> set[str]:
    """Every request digest the recording holds, whatever its format's tables."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {
            row[0]
            for table in tables
            if "digest" in [c[1] for c in db.execute(f"PRAGMA table_info({table})")]
            for row in db.execute(f"SELECT digest FROM {table}")
        }


def poison_the_recording(society: Society, backend: FakeOpenAI, token: str, thread: str) -> None:
    """Issue 33: recordings were keyed by request digest alone, so another caller sending the
    same request (differing only in `user`, or naming the run) replaced the answer `replay
    --offline` serves. Mallory sends termgen's exact request three ways while the backend
    answers poison; each must be answered (it is Mallory's own call) and recorded, if at all,
    for Mallory, never over termgen's answer."""
    sent = next(r["body"] for r in backend.requests if "step: termgen" in json.dumps(r["body"]))
    body = {k: v for k, v in sent.items() if k != "stop"}  # the gateway adds no stop here
    recording = society.root / "state" / "gateway" / "recording.sqlite"
    assert request_digest(body) in recorded_digests(recording)  # termgen's request, exactly
    backend.script["termgen"] = json.dumps({"terms": ["poison"] * 12})
    url = society.home.gateway_url() + "/chat/completions"
    headers = {"authorization": f"Bearer {token}"}
    for extra, more_headers in (
        ({}, {}),
        ({"user": "someone else"}, {}),
        ({}, {"x-bullpen-run": thread}),  # claiming termgen's run does not make it termgen
    ):
        answer = HTTP.post(url, json={**body, **extra}, headers={**headers, **more_headers})
        assert answer.status_code == 200, answer.text
        assert "poison" in answer.text
    # termgen's seat named its run (x-bullpen-run): its answer is kept under it, unchanged.
    kept = Recording(recording).answer("termgen", thread, request_digest(body))
    assert kept is not None and "poison" not in json.dumps(kept)


@pytest.mark.long
def test_an_offline_replay_asks_no_backend(tmp_path: Path, backend: FakeOpenAI) -> None:
    """termgen through the recording gateway: the run asks the fake backend; another caller's
    identical requests do not replace its answer; the offline replay of the step, and of
    every step of the run, gives the recorded answers with zero requests to it, and a request
    with no recording (another model) fails loud naming the step, still asking nothing."""
    society = Society(tmp_path / "home", demo=True)
    section = gateway_section(
        free_port(),
        {"fake": {"base_url": backend.base_url, "prefixes": ["test"], "check": False}},
        record=True,
    )
    (society.root / "society.toml").write_text(
        (society.root / "society.toml").read_text() + section
    )
    set_seat(society.root, "termgen", 'kind = "openai"\nvia = "gateway"\nmodel = "test-model"')
    set_seat(society.root, "other", 'kind = "openai"\nvia = "gateway"\nmodel = "test-other"')
    issue(society.home, "termgen")
    mallory = issue(society.home, "mallory").read_text().strip()  # another caller
    up = start_up(society, nicks=EXPEDITION_LURKERS)
    done = run_cli(society.root, *EXPEDITION, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    thread = thread_from(done.stdout + done.stderr)
    asked = len(backend.requests)
    assert asked >= 1
    recording = society.root / "state" / "gateway" / "recording.sqlite"
    assert stat.S_IMODE(os.stat(recording).st_mode) == 0o600
    token = society.home.gateway_token_file("termgen").read_text().strip()
    assert token.encode() not in recording.read_bytes()
    room = society.room.read_bytes()
    poison_the_recording(society, backend, mallory, thread)
    asked = len(backend.requests)

    replay = run_cli(
        society.root, "replay", thread, "--step", "terms", "--offline", "--json", timeout=120
    )
    assert replay.returncode == 0, replay.stderr
    result = json.loads(replay.stdout)
    assert result["replayed"]["data"]["terms"] == result["recorded"]["data"]["terms"]
    assert result["replayed"]["data"]["judgments"][-1]["seat_kind"] == "openai"
    assert result["gates"]["replayed"]["pass"] is True
    assert len(backend.requests) == asked  # not one request reached the backend

    whole = run_cli(society.root, "replay", thread, "--all", "--offline", "--json", timeout=240)
    assert whole.returncode == 0, whole.stderr
    steps = json.loads(whole.stdout)
    assert [r["step"] for r in steps][:3] == ["context", "terms", "retrieve"]
    assert "excerpts" in [r["step"] for r in steps]
    for step in steps:  # the whole run to its Dig Report, answered as recorded
        assert step["replayed"]["body"] == step["recorded"]["body"], step["step"]
        assert step["gates"]["replayed"]["pass"] is True
    assert len(backend.requests) == asked

    missing = run_cli(
        society.root,
        "replay",
        thread,
        "--step",
        "terms",
        "--offline",
        "--seat",
        "other",
        timeout=120,
    )
    assert missing.returncode == 1, missing.stdout + missing.stderr
    assert "offline replay of step terms (@termgen)" in missing.stderr
    assert "no recorded answer" in missing.stderr
    assert len(backend.requests) == asked
    assert society.room.read_bytes() == room
    up.stop()

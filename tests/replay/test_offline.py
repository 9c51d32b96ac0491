"""Recordings: `[gateway] record = true` keeps each answer by request digest, and `replay
--offline` answers from them with no backend request at all."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.gateway.tokens import issue
from tests.fakes.expedition_model import TERMS
from tests.fakes.fake_openai import FakeOpenAI
from tests.gateway.helpers import gateway_section
from tests.replay.conftest import EXPEDITION, thread_from
from tests.support import EXPEDITION_LURKERS, Society, free_port, run_cli, set_seat, start_up


@pytest.fixture
def backend() -> Iterator[FakeOpenAI]:
    with FakeOpenAI({"termgen": json.dumps({"terms": TERMS})}) as server:
        yield server


@pytest.mark.long
@pytest.mark.long
def test_an_offline_replay_asks_no_backend(tmp_path: Path, backend: FakeOpenAI) -> None:
    """termgen through the recording gateway: the run asks the fake backend; the offline
    replay of the step, and of every step of the run, gives the recorded answers with zero
    requests to it, and a request with no recording (another model) fails loud naming the
    step, still asking nothing."""
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

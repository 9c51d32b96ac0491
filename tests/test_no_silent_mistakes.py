"""Mistakes an operator makes that once passed in silence, each now refused or warned about with
one line of right advice, driven through the real command against a real hub."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.helpers import GatewayHome
from tests.support import Society, add_nick, bullpen_argv, run_cli, wait_for


@pytest.fixture
def society(tmp_path: Path) -> Iterator[Society]:
    society = Society(tmp_path / "home")
    try:
        society.start_hub()
        yield society
    finally:
        society.stop_all()


def test_trust_check_loads_each_handler(tmp_path: Path) -> None:
    """A nick whose handler cannot be imported is a problem of the static check too."""
    society = Society(tmp_path / "home")
    add_nick(society.root, "ghost", handler="agents.nosuchmodule:step")
    done = run_cli(society.root, "trust", "check", "--static")
    assert done.returncode != 0, done.stdout
    said = done.stdout + done.stderr
    assert "ghost" in said and "agents.nosuchmodule:step" in said and "cannot be loaded" in said
    as_json = run_cli(society.root, "trust", "check", "--static", "--json")
    assert as_json.returncode == done.returncode
    verdict = json.loads(as_json.stdout)
    (ghost,) = [n for n in verdict["nicks"] if n["nick"] == "ghost"]
    assert verdict["ok"] is False and ghost["ok"] is False
    assert any("cannot be loaded" in p for p in ghost["problems"])


def test_say_read_and_tail_refuse_or_warn(society: Society) -> None:
    before = len(society.lines())
    empty = run_cli(society.root, "say", "@echo", "  ", "--type", "ask")
    assert empty.returncode == 2 and "an ask with an empty body asks nothing" in empty.stderr
    stray = run_cli(society.root, "say", "@operator", "ok", "--type", "reply", "--reply-to", "01X")
    assert (
        stray.returncode == 2 and "--reply-to 01X: no line of the room has that id" in stray.stderr
    )
    assert len(society.lines()) == before  # nothing was written

    posted = run_cli(society.root, "say", "@operator", "hi", "--thread", "exp-1234abcd")
    assert posted.returncode == 0, posted.stderr
    missing = run_cli(society.root, "read", "--thread", "exp-1234abce")
    assert missing.returncode == 0 and missing.stdout == ""
    assert "no line of the room has thread exp-1234abce (did you mean exp-1234abcd?)" in (
        missing.stderr
    )

    log = society.root / "tail.log"
    with log.open("wb") as out:
        tail = subprocess.Popen(
            bullpen_argv(society.root, "tail", "--to", "operater"),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_for(lambda: "did you mean" in log.read_text(), 30, "tail's warning")
        assert "@operater is no nick of this society" in log.read_text()
        assert "(did you mean @operator?)" in log.read_text()
    finally:
        tail.kill()
        tail.wait(10)


def test_a_string_for_record_is_refused_and_offline_replay_says_what_is_missing(
    tmp_path: Path,
) -> None:
    society = Society(tmp_path / "home")
    gateway = GatewayHome(society)
    gateway.configure(
        {"local": {"base_url": "http://127.0.0.1:9/v1", "prefixes": ["x"]}}, record="yes"
    )
    toml = society.root / "society.toml"
    assert 'record = "yes"' in toml.read_text()
    done = run_cli(society.root, "gateway", "usage")
    assert done.returncode == 78, done.stdout + done.stderr
    assert "record" in done.stderr and "boolean" in done.stderr

    toml.write_text(toml.read_text().replace('record = "yes"', "record = true"))
    usage = run_cli(society.root, "gateway", "usage", "--json")
    assert usage.returncode == 0 and json.loads(usage.stdout) == []  # no ledger yet
    from agents.home import Home
    from agents.replay.offline import no_recording_advice

    home = Home(society.root)
    said = no_recording_advice(home, home.path("gateway/recording.jsonl"))
    assert "[gateway] records (record = true)" in said and "set `record = true`" not in said
    assert "base_url" not in said

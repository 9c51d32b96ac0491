"""When `bullpen up` must not start: the society is already up, or the hub's configuration is wrong."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from tests.support import Society, bullpen_argv, start_up
from tests.test_lurker import replies_to, say, wait_reply


def test_a_second_up_refuses_and_nothing_answers_twice(society: Society) -> None:
    """With the society already up, a second `bullpen up` exits 1 before starting anything."""
    up = start_up(society, ready=True)
    try:
        second = subprocess.run(
            bullpen_argv(society.root, "up"), capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 1, second.stderr
        assert "already answers" in second.stderr and "--no-hub" in second.stderr
        assert "lurkers up" not in second.stderr
        ask = say(society, "@echo", "only once")
        wait_reply(society, ask["id"], 30)
        assert len(replies_to(society, ask["id"])) == 1
    finally:
        up.stop()


def test_a_hub_configuration_error_makes_up_exit_78(society: Society) -> None:
    """A loose secret stops the hub with 78; up passes the 78 on, so its unit is not restarted."""
    society.home.trust.secret_file.chmod(0o644)
    done = subprocess.run(
        bullpen_argv(society.root, "up"), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 78, done.stderr
    assert "chmod 600" in done.stderr and "did not start" in done.stderr


def test_another_rooms_hub_on_our_port_is_named_as_such(society: Society, tmp_path: Path) -> None:
    """A hub of another home on this home's port: up says the port is taken by another room,
    and does not suggest attaching this home's lurkers to it."""
    other = Society(tmp_path / "other")
    hub = other.start_hub()
    try:
        with httpx.Client(base_url=other.strict_url, timeout=10) as client:
            body = {"from": "stranger", "to": "@echo", "type": "chat", "body": "theirs"}
            assert client.post("/say", json=body).status_code == 200
        toml = society.root / "society.toml"
        toml.write_text(
            toml.read_text().replace(
                f"127.0.0.1:{society.strict_port}", f"127.0.0.1:{other.strict_port}"
            )
        )
        done = subprocess.run(
            bullpen_argv(society.root, "up"), capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 1, done.stderr
        assert "another room" in done.stderr and "--no-hub" not in done.stderr
    finally:
        hub.stop()


def test_up_nicks_starts_only_those_and_refuses_an_unknown_one(society: Society) -> None:
    """`up --nicks` names a nick with no [nicks.X]: exit 2 naming it, nothing started; with
    known nicks it starts those lurkers and no other."""
    done = subprocess.run(
        bullpen_argv(society.root, "up", "--nicks", "echo,ghost"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "no [nicks.ghost]" in done.stderr and "echo" in done.stderr
    assert not society.healthy()  # not even the hub was started
    up = start_up(society, nicks=("echo",))
    assert "lurkers up: 1 lurker listening" in up.output()
    ask = say(society, "@echo", "only me")
    assert wait_reply(society, ask["id"])["body"] == "echo: only me"
    assert not (society.root / "logs" / "foreman.log").exists()

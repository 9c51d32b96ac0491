"""Listener ports picked below the ephemeral range, where no outgoing connection can take them
between the probe and the listener's bind (a CI run lost a hub to that race)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from agents.runtime.netports import (
    PortRangeError,
    below_ephemeral,
    ephemeral_start,
    free_ports,
    parse_range,
)
from tests.support import Society, free_port, run_cli


def test_a_range_is_low_dash_high_within_the_unprivileged_ports() -> None:
    assert parse_range("20000-20009") == range(20000, 20010)
    for bad in ("20000", "20009-20000", "80-90", "20000-70000", "a-b", "-"):
        with pytest.raises(PortRangeError, match="LOW-HIGH"):
            parse_range(bad)


def test_ports_come_distinct_and_free_from_the_span_skipping_a_taken_one() -> None:
    span = below_ephemeral()
    assert span is not None, "this machine has no ports below its ephemeral range"
    assert span.stop == ephemeral_start()
    with socket.socket() as taken:
        first = free_port()
        taken.bind(("127.0.0.1", first))
        picked = free_ports(3, range(first, first + 40))
    assert len(set(picked)) == 3
    assert first not in picked
    assert all(first < port < first + 40 for port in picked)


def test_a_full_span_is_an_error_that_names_it() -> None:
    with socket.socket() as taken:
        port = free_port()
        taken.bind(("127.0.0.1", port))
        with pytest.raises(
            OSError, match=f"only 0 of 1 ports are free in {port}-{port}; stop what holds them"
        ):
            free_ports(1, range(port, port + 1))


def test_the_tests_own_ports_lie_below_the_ephemeral_range() -> None:
    start = ephemeral_start()
    assert start is not None
    assert all(port < start for port in (free_port() for _ in range(50)))


def test_the_demo_refuses_a_malformed_range_before_it_lays_down_a_home(tmp_path: Path) -> None:
    home = tmp_path / "demo-home"
    done = run_cli(home, "demo", env={"BULLPEN_PORT_RANGE": "9000"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "BULLPEN_PORT_RANGE='9000' is not a port range" in done.stderr
    assert not home.exists()


def test_the_demo_says_what_to_do_when_its_range_has_no_free_port(tmp_path: Path) -> None:
    home = tmp_path / "demo-home"
    with socket.socket() as taken:
        port = free_port()
        taken.bind(("127.0.0.1", port))
        done = run_cli(home, "demo", env={"BULLPEN_PORT_RANGE": f"{port}-{port}"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"only 0 of 2 ports are free in {port}-{port}" in done.stderr
    assert "set BULLPEN_PORT_RANGE=LOW-HIGH" in done.stderr
    assert not home.exists()


def test_a_test_hub_whose_port_was_taken_starts_again_on_new_ports(society: Society) -> None:
    """Another run on a shared machine may bind a port picked here before the hub does: the
    hub says it cannot listen, and Society.start_hub starts it again on two new ports."""
    picked = society.strict_port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", picked))
        taken.listen()
        society.start_hub()
        assert society.strict_port != picked and society.healthy()
    first = (society.root / "test-logs" / "hub.log").read_text()
    assert f"cannot listen on 127.0.0.1:{picked}" in first
    config = (society.root / "society.toml").read_text()
    assert f'strict = "127.0.0.1:{society.strict_port}"' in config
    assert f'relaxed = "127.0.0.1:{society.relaxed_port}"' in config

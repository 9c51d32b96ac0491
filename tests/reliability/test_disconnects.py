"""A client that hangs up in the middle of a post's body costs the hub one log line, not a traceback.

A hostile neighbour that opens /say, sends half its declared body and
closes, over and over, grew the hub's log by 3.5 MB in 3 s (a traceback per
connection). Each such hang-up must now be at most a few short lines, and
the hub keeps serving.
"""

from __future__ import annotations

import socket
from pathlib import Path

from tests.support import HTTP, Society, run_cli, start_up, wait_for

HANGUPS = 50


def _half_a_body(port: int) -> None:
    body = b'{"from":"stranger","to":"@echo","type":"chat","body":"' + b"x" * 2000
    head = (
        b"POST /say HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + b"Content-Length: %d\r\n\r\n" % (len(body) * 2)
    )
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(head + body)


def test_half_sent_bodies_are_one_line_each(tmp_path: Path) -> None:
    """50 clients that close mid-body add at most a few lines each to the hub's log, no Traceback."""
    society = Society(tmp_path / "home")
    hub = society.start_hub()
    try:
        log = hub.log
        before = log.read_bytes()
        for _ in range(HANGUPS):
            _half_a_body(society.strict_port)

        def settled() -> bool:
            return log.read_bytes().count(b"client hung up mid-request") >= HANGUPS

        wait_for(settled, 20, "the hub to note every hang-up")
        grown = log.read_bytes()[len(before) :]
        assert b"Traceback" not in grown, grown[:2000].decode(errors="replace")
        assert grown.count(b"\n") <= 3 * HANGUPS, grown[:2000].decode(errors="replace")
        assert len(grown) < 400 * HANGUPS
        # the hub still serves its society
        assert run_cli(society.root, "say", "@echo", "still here").returncode == 0
        assert HTTP.get(f"{society.strict_url}/health", timeout=5).status_code == 200
    finally:
        society.stop_all()


def _size(path: Path) -> int:
    """A log's size, 0 while a rotation has it renamed and not yet made again."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _read(path: Path) -> bytes:
    """A log's bytes, none if a rotation moved it between the listing and the read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def test_hub_log_under_up_is_rotated(tmp_path: Path) -> None:
    """Under `bullpen up` a noisy hub's log is rotated at [logs] max_bytes, keeping [logs] keep files."""
    society = Society(tmp_path / "home")
    society_file = society.root / "society.toml"
    society_file.write_text(society_file.read_text() + "\n[logs]\nmax_bytes = 4096\nkeep = 2\n")
    up = start_up(society)
    logs = society.root / "logs"
    try:
        for _ in range(120):  # ~140 bytes of log each: about 4 rotations' worth
            _half_a_body(society.strict_port)

        def rotated_twice() -> bool:
            if (logs / "hub.log.2").exists() and _size(logs / "hub.log") > 0:
                return True
            # `up` rotates when it reads the hub's output, which comes in whatever chunks the
            # pipe gives it: the noise goes on until two rotations are seen
            _half_a_body(society.strict_port)
            return False

        wait_for(rotated_twice, 60, "the hub's log to rotate twice")
        wait_for(
            lambda: sum(_read(p).count(b"client hung up") for p in logs.glob("hub.log*")) > 0,
            10,
            "the hub's log to hold hang-ups",
        )
        assert not (logs / "hub.log.3").exists()
        for path in logs.glob("hub.log*"):
            assert path.stat().st_size <= 4096 + 64 * 1024
            assert path.stat().st_mode & 0o077 == 0, oct(path.stat().st_mode)
        assert run_cli(society.root, "say", "@echo", "still here").returncode == 0
    finally:
        up.stop()
        society.stop_all()
    assert up.proc.returncode == 0, up.output()

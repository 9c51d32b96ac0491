"""NATS goes away under a running hub: /health says so, and a post it cannot confirm stops the hub.

The stream engine's counterpart of the JSONL engine's fsync failure: a post
the NATS servers did not confirm in time may or may not be stored, so the
hub answers 503, stops accepting posts and exits (70), dropping whatever the
NATS client still held, so that nothing is published after the poster was
told it may not have been (docs/scaling.md).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.jetstream.helpers import post
from tests.jetstream.servers import NatsCluster
from tests.support import HTTP, StreamSociety, bullpen_argv, wait_for

EXIT_DISK = 70


def health(society: StreamSociety) -> httpx.Response | None:
    try:
        return HTTP.get(f"{society.strict_url}/health", timeout=2)
    except httpx.HTTPError:
        return None


def health_status(society: StreamSociety) -> int:
    answer = health(society)
    return 0 if answer is None else answer.status_code


def test_health_is_503_while_nats_is_down_and_200_once_it_is_back(
    tmp_path: Path, own_nats: Callable[..., NatsCluster]
) -> None:
    """/health follows the engine: not ok while it cannot store, ok again when it can."""
    server = own_nats()
    society = StreamSociety(tmp_path / "home", server.urls)
    society.start_hub()
    post(society, "@echo", "before")
    assert health_status(society) == 200

    server.stop()
    wait_for(lambda: health_status(society) == 503, 15, "/health to report the engine down")
    answer = health(society)
    assert answer is not None
    body = answer.json()
    assert body["ok"] is False and body["seq"] == 1
    assert "NATS" in body["problem"]

    server.start()
    wait_for(lambda: health_status(society) == 200, 30, "/health to report the engine back")
    assert health(society).json()["ok"] is True  # type: ignore[union-attr]
    assert post(society, "@echo", "after")["seq"] == 2


@pytest.mark.long
def test_a_post_nats_never_confirmed_stops_the_hub_and_is_never_stored_later(
    tmp_path: Path, own_nats: Callable[..., NatsCluster]
) -> None:
    """503 at the deadline, hub exits 70, and NATS coming back while it stops stores nothing."""
    server = own_nats()
    society = StreamSociety(tmp_path / "home", server.urls)
    hub = society.start_hub()
    first = post(society, "@echo", "before the outage")
    server.stop()
    wait_for(lambda: health_status(society) == 503, 15, "the hub to notice NATS is gone")

    # A request whose body never comes keeps the stopping hub alive for its
    # graceful-shutdown grace (5 s): long enough for its NATS client to reconnect.
    slow = socket.create_connection(("127.0.0.1", society.strict_port))
    try:
        slow.sendall(b"POST /say HTTP/1.1\r\nHost: hub\r\nContent-Length: 100\r\n\r\n{")
        # An unsigned post (no nonce to reserve), through the CLI a person would use.
        started = time.monotonic()
        say = subprocess.run(
            bullpen_argv(society.root, "say", "--as", "visitor", "@echo", "during the outage"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        waited = time.monotonic() - started
        server.start()  # NATS is back while the hub is still stopping
        assert say.returncode == 1, say.stderr
        assert "did not store the post within 30 s" in say.stderr, say.stderr
        assert "may or may not have been stored" in say.stderr
        assert "ReadTimeout" not in say.stderr
        assert waited > 25, f"the client gave up after {waited:.1f} s, before the hub answered"
        wait_for(lambda: not hub.alive(), 30, "the hub to stop")
    finally:
        slow.close()
    assert hub.stop() == EXIT_DISK, hub.output()
    said = hub.output().splitlines()[-1]
    assert said.startswith("bullpen hub: the NATS servers did not store the post within 30 s")
    assert "may or may not have been stored" in said
    assert (
        "room/jetstream/engine.py" not in hub.output()
    )  # (uvicorn logs cancelling the slow request)

    # NATS is back and the hub is gone: the unconfirmed post never landed.
    lines = society.lines()
    assert [line["body"] for line in lines] == [first["body"]]
    society.start_hub()
    assert post(society, "@echo", "once the hub is back")["seq"] == 2
    assert [line["body"] for line in society.lines()] == [first["body"], "once the hub is back"]

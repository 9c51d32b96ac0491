"""Messages published straight to the stream, past the hub: every reader skips them and goes on.

Anyone who can publish to the stream's subjects bypasses the gate
(docs/scaling.md); `bullpen audit` fails on such a message. Until the
operator has looked, the room must keep working: /read serves only room
lines (its last_seq still covers the foreign ones), `bullpen tail` does not
crash, and a lurker acknowledges what it skipped so its consumer does not
keep it pending forever.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from room.client import RoomClient
from room.jetstream.follow import consumer_name
from room.log import Draft, build_line
from room.message import parse_line, parse_request_obj
from room.tail import HubFollower, Position
from tests.jetstream.helpers import post, read, with_js
from tests.support import HTTP, StreamSociety, add_nick, run_cli, wait_for


def replied_to(society: StreamSociety, ask: dict[str, Any]) -> bool:
    return any(line["in_reply_to"] == ask["id"] for line in read(society, **{"from": "worker"}))


def publish_raw(society: StreamSociety, subject: str, data: bytes) -> int:
    """Publish bytes straight to the stream, as a client past the hub could; the stream seq."""

    async def send(js: Any) -> int:
        ack = await js.publish(subject, data, stream=society.stream)
        return int(ack.seq)

    return with_js(society.servers, send)


def test_foreign_messages_are_skipped_by_read_tail_and_the_lurker(
    tmp_path: Path, nats_server: Any
) -> None:
    """Garbage, non-objects and a line at the wrong seq: skipped, acknowledged, the room goes on."""
    society = StreamSociety(tmp_path / "home", nats_server.urls)
    add_nick(society.root, "worker", handler="tests.tools.steps:counted", timeout_s=30)
    env = {"BULLPEN_TEST_COUNT_FILE": str(tmp_path / "handled")}
    try:
        society.start_hub()
        lurker = society.start_lurker("worker", env=env)
        tail = society.spawn("tail", "tail", "--json", "--after", "0")
        first = post(society, "@worker", "first")
        wait_for(lambda: replied_to(society, first), 20, "the first reply")

        subject = f"{society.stream.lower()}.to.worker.ask"
        misplaced = dict(first, seq=999_999, id="01J0000000000000000000FAKE")
        foreign = [  # the last one is garbage: a lurker that skips it must still ack it
            json.dumps(misplaced, separators=(",", ":")).encode(),
            b'not json "thread":"t1"',
            b"[1, 2]",
            b'{"garbage":1}',
        ]
        seqs = [publish_raw(society, subject, data) for data in foreign]

        # The lurker skipped them and acknowledged them: nothing stays pending.
        def consumer_caught_up() -> bool:
            info = with_js(
                society.servers,
                lambda js: js.consumer_info(society.stream, consumer_name("worker")),
            )
            return info.num_ack_pending == 0 and info.ack_floor.stream_seq == seqs[-1]

        wait_for(consumer_caught_up, 20, "the lurker to acknowledge the skipped messages")
        skipped = [line for line in lurker.output().splitlines() if "not a room line" in line]
        assert {s for s in seqs if any(f'"seq": {s}' in line for line in skipped)} == set(seqs)

        # /read serves room lines only; its last_seq covers the foreign messages.
        answer = HTTP.get(
            f"{society.strict_url}/read", params={"after": 0}, headers=society.read_headers()
        ).json()
        assert answer["last_seq"] == seqs[-1]
        assert [m["seq"] for m in answer["messages"]] == [1, 2]
        for message in answer["messages"]:
            parse_line(json.dumps(message))
        assert HTTP.get(
            f"{society.strict_url}/read", params={"thread": "t1"}, headers=society.read_headers()
        ).json() == {
            "messages": [],
            "last_seq": seqs[-1],
        }
        to_worker = HTTP.get(
            f"{society.strict_url}/read", params={"to": "worker"}, headers=society.read_headers()
        ).json()
        assert [m["id"] for m in to_worker["messages"]] == [first["id"]]
        hub = society.procs[0]
        for seq in seqs:
            assert f'"stream_seq": {seq}' in hub.output(), hub.output()

        # A hub started over a stream that ends in one serves the room, as the last one did.
        wait_for(lambda: first["id"] in tail.output(), 10, "tail to be following the hub")
        assert hub.stop() == 0
        restarted = society.start_hub()
        wait_for(lambda: "hub listening" in restarted.output(), 10, "the hub to start again")
        assert f'"stream_seq": {seqs[-1]}' in restarted.output()
        again = HTTP.get(
            f"{society.strict_url}/read", params={"after": 0}, headers=society.read_headers()
        ).json()
        assert again == answer

        # The room goes on past them.
        second = post(society, "@worker", "second")
        assert second["seq"] == seqs[-1] + 1
        wait_for(lambda: replied_to(society, second), 20, "the reply after the foreign messages")
        wait_for(lambda: second["id"] in tail.output(), 10, "tail to show the next ask")
        assert tail.alive(), tail.output()
        assert "Traceback" not in tail.output() and "ValidationError" not in tail.output()
        read_cli = run_cli(society.root, "read")
        assert read_cli.returncode == 0, read_cli.stderr
        assert len(read_cli.stdout.splitlines()) == 4
        audit = run_cli(society.root, "audit")
        assert audit.returncode == 1 and f"FAILED at seq {seqs[0]}" in audit.stdout
    finally:
        society.stop_all()


class _FakeHub(BaseHTTPRequestHandler):
    """A hub whose /read hands out a line that is not a room message, then a real one."""

    answer: bytes = b""

    def do_GET(self) -> None:
        after = self.path.split("after=")[1].split("&")[0]
        body = self.answer if after == "0" else b'{"messages":[],"last_seq":2}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_hub() -> Iterator[str]:
    post_ = parse_request_obj({"from": "a", "to": "@b", "type": "chat", "body": "real"}).post
    line = build_line(
        2, "01J00000000000000000000002", 1_700_000_000_000, Draft(post_, False), "0" * 64
    )
    _FakeHub.answer = b'{"messages":[{"garbage":1},3,' + line + b'],"last_seq":2}'
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_hub_follower_skips_what_is_not_a_room_message(fake_hub: str) -> None:
    """A reader following any hub yields the next real line instead of crashing on a bad one."""

    async def first() -> int:
        async with RoomClient(fake_hub) as client:
            async for message, _ in HubFollower(client, Position(0), wait_s=0.1).follow():
                return message.seq
        return 0

    assert asyncio.run(asyncio.wait_for(first(), 10)) == 2

"""POST /say's plain-ASGI path (room/say.py) and the per-line helpers made cheap for it.

Through a real hub on loopback: bodies that arrive in pieces or without a
declared length, the answer's exact bytes and headers, a hang-up mid-body,
and a signed post's nonce in its acknowledged line (never its HMAC). In
process: the ULID and timestamp encoders against their plain definitions,
and strict JSON's shortcut refusing all it refused before.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from room import strictjson
from room.guard import NO_UPGRADE
from room.ids import IdClock, _encode, rfc3339_ms
from room.message import Post
from room.say import MAX_REQUEST_BYTES
from tests.support import HTTP, Society, set_hub, wait_for
from trust.proof import SecretSigner

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


@pytest.fixture(scope="module")
def hubbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Society]:
    society = Society(tmp_path_factory.mktemp("say") / "home")
    society.start_hub()
    try:
        yield society
    finally:
        society.stop_all()


def exchange(society: Society, parts: list[bytes], pause: float = 0.05) -> tuple[bytes, bytes]:
    """Send a request in `parts` (pausing between them) over one socket; return (head, body).

    The sending runs beside the reading: a hub that refuses a body part-way answers
    (and may close) before the rest is sent, which is no failure of the test.
    """
    with socket.create_connection(("127.0.0.1", society.strict_port), timeout=10) as sock:

        def send_all() -> None:
            for i, part in enumerate(parts):
                if i:
                    time.sleep(pause)
                try:
                    sock.sendall(part)
                except OSError:
                    return

        sender = threading.Thread(target=send_all, daemon=True)
        sender.start()
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            chunk = sock.recv(65536)
            assert chunk, "the hub closed before its answer was whole"
            body += chunk
        sender.join(10)
        return head, body


def request_head(length: int | None, extra: str = "") -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        f"POST /say HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{framing}\r\n"
        f"{extra}\r\n"
    ).encode()


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


def test_a_body_in_pieces_is_stored_whole_and_answered_with_its_exact_line(
    hubbed: Society,
) -> None:
    """A body split across packets is read to its end; the answer is the stored line's bytes."""
    body = json.dumps({"from": "piecemeal", "to": "@echo", "type": "chat", "body": "a" * 5000})
    raw = body.encode()
    head, answer = exchange(hubbed, [request_head(len(raw)) + raw[:10], raw[10:3000], raw[3000:]])
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"content-type: application/json" in head.lower()
    stored = json.loads(answer)
    assert stored["body"] == "a" * 5000 and stored["from"] == "piecemeal"
    on_disk = hubbed.room.read_bytes().split(b"\n")[stored["seq"] - 1]
    assert answer == on_disk  # the reply is the line exactly as the room holds it


def test_a_chunked_body_is_read_and_one_past_the_bound_is_413(hubbed: Society) -> None:
    """No declared length: the body is read chunk by chunk, and cut off at the bound (413)."""
    body = json.dumps({"from": "chunky", "to": "@echo", "type": "chat", "body": "hi"}).encode()
    head, answer = exchange(hubbed, [request_head(None) + chunked(body[:7], body[7:])])
    assert head.startswith(b"HTTP/1.1 200") and json.loads(answer)["from"] == "chunky"
    before = hubbed.room.read_bytes()
    piece = b" " * (256 * 1024)
    pieces = [piece] * (MAX_REQUEST_BYTES // len(piece) + 1)
    head, answer = exchange(hubbed, [request_head(None) + chunked(*pieces)], pause=0)
    assert head.startswith(b"HTTP/1.1 413"), head
    refusal = json.loads(answer)
    assert refusal["error"] == "bad_post" and "MiB" in refusal["message"]
    assert hubbed.room.read_bytes() == before


def test_bad_json_gets_the_json_400_with_its_reason(hubbed: Society) -> None:
    """The fast path answers bad input as the routes did: a JSON 400 naming the problem."""
    raw = b'{"from": "x", "from": "y"}'
    head, answer = exchange(hubbed, [request_head(len(raw)) + raw])
    assert head.startswith(b"HTTP/1.1 400")
    assert "duplicate key" in json.loads(answer)["message"]


def test_an_upgrade_is_refused_with_its_reason_and_logs_nothing(hubbed: Society) -> None:
    """The hub serves no websockets (nor h2c): a request asking to switch protocols gets a 400
    that says so, after the whole request before it on the connection is answered; nothing
    of it is stored, and no caller can fill the hub's log with uvicorn's advice to install a
    websocket library."""
    before = hubbed.room.read_bytes()
    good = json.dumps({"from": "first", "to": "@echo", "type": "chat", "body": "hi"}).encode()
    raw = json.dumps({"from": "upgrader", "to": "@echo", "type": "chat", "body": "hi"}).encode()
    upgrade = "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
    with socket.create_connection(("127.0.0.1", hubbed.strict_port), timeout=10) as sock:
        sock.sendall(request_head(len(good)) + good + request_head(len(raw), upgrade) + raw)
        answers = b""
        while chunk := sock.recv(65536):  # the 400 closes the connection
            answers += chunk
    assert answers.startswith(b"HTTP/1.1 200"), answers[:200]
    refusal = answers[answers.index(b"HTTP/1.1 400") :]
    assert refusal.endswith(NO_UPGRADE.encode()), refusal
    stored = hubbed.room.read_bytes()[len(before) :]
    assert b'"first"' in stored and b"upgrader" not in stored
    assert "upgrade" not in hubbed.procs[0].output().lower()


def test_a_hang_up_mid_body_writes_nothing_and_the_hub_serves_on(hubbed: Society) -> None:
    """A poster gone mid-body gets no line stored; the next poster is served as usual."""
    before = hubbed.room.read_bytes()
    hub = hubbed.procs[0]
    told = hub.output().count("client hung up mid-request")
    with socket.create_connection(("127.0.0.1", hubbed.strict_port), timeout=10) as sock:
        sock.sendall(request_head(500) + b'{"from": "gone", "to": "@echo", ')
        time.sleep(0.1)
    wait_for(
        lambda: hub.output().count("client hung up mid-request") > told, 10, "the hang-up line"
    )
    assert hubbed.room.read_bytes() == before
    answer = HTTP.post(
        f"{hubbed.strict_url}/say",
        json={"from": "after", "to": "@echo", "type": "chat", "body": "still here"},
    )
    assert answer.status_code == 200 and answer.json()["body"] == "still here"


def test_a_signed_posts_nonce_is_in_its_acknowledged_line_and_its_hmac_nowhere(
    hubbed: Society,
) -> None:
    """When the hub answers 200 for a proved post, the line it returns (and the room) holds the
    proof's nonce, so the room itself remembers it; the HMAC is stored nowhere, and no nonce
    journal is written beside the room."""
    secret = hubbed.secret()
    for k in range(5):
        payload = {"from": "operator", "to": "@echo", "type": "chat", "body": f"signed {k}"}
        payload.update(SecretSigner(secret).prove(Post.model_validate(payload)))
        answer = HTTP.post(f"{hubbed.strict_url}/say", json=payload, timeout=10)
        assert answer.status_code == 200 and answer.json()["verified"] is True
        line = answer.json()
        assert line["nonce"] == payload["proof"]["nonce"]
        assert list(line)[-3:] == ["verified", "nonce", "prev"]  # docs/room.md's order
        room = hubbed.room.read_bytes()
        assert answer.content in room and payload["proof"]["hmac"].encode() not in room
        again = HTTP.post(f"{hubbed.strict_url}/say", json=payload, timeout=10)
        assert again.status_code == 401 and "already used" in again.json()["message"]
    assert not Path(str(hubbed.room) + ".nonces").exists()
    plain = {"from": "plain", "to": "@echo", "type": "chat", "body": "no proof"}
    assert "nonce" not in HTTP.post(f"{hubbed.strict_url}/say", json=plain, timeout=10).json()
    forged = {**plain, "nonce": "abcdefgh12"}
    refused = HTTP.post(f"{hubbed.strict_url}/say", json=forged, timeout=10)
    assert refused.status_code == 400 and "set by the hub" in refused.json()["message"]


def _plain_base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, rem = divmod(value, 32)
        chars.append(ALPHABET[rem])
    return "".join(reversed(chars))


def test_ulids_and_timestamps_match_their_plain_definitions() -> None:
    """The C-backed encoders give the same text as the digit-by-digit definitions."""
    rng = random.Random(26)
    for _ in range(5000):
        ms, rand = rng.randrange(1 << 48), rng.randrange(1 << 80)
        assert _encode((ms << 80) | rand, 26) == _plain_base32(ms, 10) + _plain_base32(rand, 16)
        stamp = rng.randrange(0, 4_102_444_800_000)
        plain = datetime.fromtimestamp(stamp // 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        assert rfc3339_ms(stamp) == f"{plain}{stamp % 1000:03d}Z"
    # the cached second must not leak into the next one
    assert rfc3339_ms(1_000_999).endswith("16:40.999Z")
    assert rfc3339_ms(1_001_000).endswith("16:41.000Z")
    clock = IdClock()
    ids = [clock.next(1_700_000_000_000)[0] for _ in range(100)]
    assert ids == sorted(ids) and len(set(ids)) == 100 and all(len(i) == 26 for i in ids)
    assert ids[0][:10] == _plain_base32(1_700_000_000_000, 10)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"body": "\\ud800"}',
        b'{"body": "\\udfff and more"}',
        b"[" * 40 + b"1" + b"]" * 40,
        b'{"a":' * 40 + b"1" + b"}" * 40,
    ],
)
def test_strict_json_still_refuses_surrogates_and_depth(raw: bytes) -> None:
    """The walk skipped for plain text still runs where a surrogate or deep nesting can hide."""
    with pytest.raises(strictjson.JsonRejected):
        strictjson.loads(raw)
    with pytest.raises(strictjson.JsonRejected):
        strictjson.loads(raw.decode())


def test_strict_json_refuses_a_lone_surrogate_in_text_given_as_str() -> None:
    """A str may hold a lone surrogate itself (no escape): it is still refused."""
    with pytest.raises(strictjson.JsonRejected, match="surrogate"):
        strictjson.loads('{"body": "\ud800"}')


@pytest.fixture(scope="module")
def hasty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Society]:
    """A hub that waits 1 s for a request head and 1.5 s for a body."""
    society = Society(tmp_path_factory.mktemp("hasty") / "home")
    set_hub(society.root, head_timeout_s=1.0, body_timeout_s=1.5)
    society.start_hub()
    try:
        yield society
    finally:
        society.stop_all()


def closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the hub closed `sock` (reading whatever it answered first), or None."""
    started = time.monotonic()
    sock.settimeout(0.1)
    while time.monotonic() - started < seconds:
        try:
            if sock.recv(65536) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except ConnectionResetError:
            return time.monotonic() - started
    return None


@pytest.mark.parametrize("stall", ["head", "body"])
def test_a_keep_alive_connection_stalling_its_next_request_is_cut_on_time(
    hasty: Society, stall: str
) -> None:
    """The lazy timer keeps each request's own deadline: after a served post, a second
    request that stalls in its head (or body) is cut by that request's timeout."""
    body = json.dumps({"from": "staller", "to": "@echo", "type": "chat", "body": "one"}).encode()
    with socket.create_connection(("127.0.0.1", hasty.strict_port), timeout=10) as sock:
        sock.sendall(request_head(len(body)) + body)
        data = b""
        while b'"body":"one"' not in data:
            data += sock.recv(65536)
        time.sleep(0.8)  # most of a head timeout, idle between requests (keep-alive's own)
        if stall == "head":
            sock.sendall(b"POST /say HTTP/1.1\r\nHost: x\r\n")
        else:
            sock.sendall(request_head(100) + b'{"from": ')
        took = closed_within(sock, 8)
    timeout = 1.0 if stall == "head" else 1.5
    assert took is not None, f"the stalled {stall} was never cut"
    assert timeout - 0.2 <= took <= timeout + 3, f"cut after {took:.2f} s, timeout {timeout} s"


def _answers(port: int, request: bytes, count: int = 1) -> list[tuple[bytes, bytes]]:
    """Send `request` (one or several pipelined) on a fresh connection and read `count`
    answers (a 100 Continue counts as one): each (head without its date line, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data, answers = b"", []
        while len(answers) < count:
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                assert chunk, f"the hub closed after {len(answers)} answers: {answers}"
                data += chunk
            head, _, data = data.partition(b"\r\n\r\n")
            lines = [line for line in head.split(b"\r\n") if not line.startswith(b"date:")]
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in lines
                    if line.startswith(b"content-") and line.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(data) < length:
                chunk = sock.recv(65536)
                assert chunk, "the hub closed before its answer was whole"
                data += chunk
            answers.append((b"\r\n".join(lines), data[:length]))
            data = data[length:]
    return answers


def _comparable(body: bytes) -> object:
    """An answer's body with what the hub stamps per line (seq, id, ts, prev) left out."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return body
    if isinstance(parsed, dict) and "seq" in parsed:
        return {k: v for k, v in parsed.items() if k not in ("seq", "id", "ts", "prev", "body")}
    return parsed


def test_the_direct_say_path_answers_exactly_as_the_asgi_path(hubbed: Society) -> None:
    """POST /say is read by the listener's protocol itself (room/direct.py); a percent-encoded
    `/s%61y` still goes through the ASGI app (room/say.py's serve_say). Every kind of answer
    (stored, refused by each check, 100 Continue, pipelined, relaxed without its token) has
    the same status line, headers and body both ways."""
    from tests.reliability.helpers import http_request

    secret = hubbed.secret()
    signed = {"from": "operator", "to": "@echo", "type": "chat", "body": "proved"}
    signed.update(SecretSigner(secret).prove(Post.model_validate(signed)))

    def plain(text: str = "hi", **extra: object) -> bytes:
        return json.dumps(
            {"from": "twin", "to": "@echo", "type": "chat", "body": text, **extra}
        ).encode()

    cases: list[tuple[str, int, str, bytes, dict[str, str], int]] = [
        # (what, port, query, body, headers, answers expected)
        ("stored", hubbed.strict_port, "", plain(), {}, 1),
        ("bad json", hubbed.strict_port, "", b"{nope", {}, 1),
        ("unknown field", hubbed.strict_port, "", plain(colour="red"), {}, 1),
        ("hub field", hubbed.strict_port, "", plain(nonce="abcdefgh"), {}, 1),
        ("secret in body", hubbed.strict_port, "", plain(secret.decode()), {}, 1),
        ("secret in query", hubbed.strict_port, f"?x={secret.decode()}", plain(), {}, 1),
        ("privileged, no proof", hubbed.strict_port, "", plain(**{"from": "operator"}), {}, 1),
        ("replayed proof", hubbed.strict_port, "", json.dumps(signed).encode(), {}, 1),
        ("expect 100", hubbed.strict_port, "", plain(), {"expect": "100-continue"}, 2),
        ("relaxed, no token", hubbed.relaxed_port, "", plain(), {}, 1),
        ("relaxed, bad token", hubbed.relaxed_port, "", plain(), {"authorization": "Bearer x"}, 1),
        ("closing", hubbed.strict_port, "", plain(), {"connection": "close"}, 1),
    ]
    first = HTTP.post(f"{hubbed.strict_url}/say", json=signed, timeout=10)
    assert first.status_code == 200  # so that the replay below is one
    statuses = set()
    for what, port, query, body, headers, count in cases:
        got = {}
        for path in ("/say", "/s%61y"):
            answers = _answers(port, http_request("POST", path + query, body, headers), count)
            got[path] = [(head, _comparable(answer)) for head, answer in answers]
        assert got["/say"] == got["/s%61y"], what
        statuses.add(got["/say"][-1][0].split(b"\r\n")[0])
    assert statuses >= {
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 400 Bad Request",
        b"HTTP/1.1 401 Unauthorized",
    }
    declared = request_head(MAX_REQUEST_BYTES + 1)  # refused on its head, before any body
    too_big = [
        _answers(hubbed.strict_port, declared.replace(b"/say", path, 1))
        for path in (b"/say", b"/s%61y")
    ]
    assert too_big[0] == too_big[1] and too_big[0][0][0].startswith(b"HTTP/1.1 413")
    # Pipelined: three posts and a read of /health in one send, answered in order.
    pipelined = b"".join(
        [
            http_request("POST", "/say", plain("one")),
            http_request("POST", "/say", b"{broken"),
            http_request("GET", "/health"),
            http_request("POST", "/say", plain("three")),
        ]
    )
    answers = _answers(hubbed.strict_port, pipelined, 4)
    assert [head.split(b"\r\n")[0] for head, _ in answers] == [
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 400 Bad Request",
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 200 OK",
    ]
    assert (
        json.loads(answers[0][1])["body"] == "one" and json.loads(answers[3][1])["body"] == "three"
    )
    assert "seq" in json.loads(answers[2][1])  # /health's answer, between them

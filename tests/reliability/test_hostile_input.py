"""Suite 7: hostile input to the post parser and to every HTTP endpoint.

Property-based (Hypothesis): the parser meets random bytes and near-valid
posts spliced with what strict JSON forbids (NaN, Infinity, 1e400, numbers
with thousands of digits, duplicate keys, lone surrogates, deep nesting);
every endpoint of a real hub meets random methods, paths, query strings,
headers and bodies; and a raw socket sends broken HTTP. The answers must be
2xx/4xx with a JSON error naming the problem — never a 5xx, never a hang —
and nothing invalid may reach the room: every line it holds was
acknowledged, parses strictly, and the chain verifies. CI runs a few hundred
examples per property; `pytest --soak` thousands.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from room import strictjson
from room.errors import BadPost, Unauthorized
from room.ids import IdClock
from room.log import Draft, build_line
from room.message import PostRequest, check_stored, parse_line, parse_request
from tests.reliability.helpers import figures
from tests.reliability.hostile_posts import posts, sizes
from tests.support import Society, wait_for
from trust.audit import audit_file


def check_parse(raw: bytes) -> PostRequest | None:
    """parse_request refuses with BadPost or returns a post whose stored line is strict and exact."""
    try:
        request = parse_request(raw)
    except BadPost as exc:
        assert exc.status in (400, 413) and exc.message
        return None
    except Unauthorized as exc:  # a malformed proof or signature is a wrong one
        assert exc.status == 401 and ("proof" in exc.message or "signature" in exc.message)
        return None
    ulid, ms = IdClock().next()
    line = build_line(7, ulid, ms, Draft(request.post, False), "0" * 64)
    assert b"\n" not in line
    strictjson.loads(line)  # strict JSON: no NaN, no lone surrogate, no duplicate key
    stored = parse_line(line)
    assert check_stored(line).to_dict() == stored.to_dict()  # and an audit would accept it
    assert stored.from_ == request.post.from_ and stored.body == request.post.body
    assert stored.data == request.post.data and stored.to == request.post.to
    assert strictjson.dumps(stored.to_dict()).encode() == line  # the exact bytes round-trip
    return request


def test_forbidden_numbers_are_refused_not_crashed() -> None:
    """1e400 (an infinite float) and a 5,000-digit integer are refused with a 400, not a crash."""
    for value in ("1e400", "-1e400", "1" * 5000, "[1e999]"):
        raw = (
            b'{"from":"a","to":"@b","type":"chat","body":"x","data":{"v":' + value.encode() + b"}}"
        )
        with pytest.raises(BadPost) as caught:
            parse_request(raw)
        assert caught.value.status == 400 and "number" in caught.value.message


@pytest.mark.soak
def test_parser_property(soak: bool) -> None:
    """Random near-valid and forbidden posts: BadPost or a post whose line is strict and exact, nothing else."""
    seen = {"accepted": 0, "refused": 0}

    @settings(max_examples=sizes(soak), derandomize=not soak, database=None, deadline=None)
    @given(st.one_of(posts(), st.binary(max_size=300)))
    def check(raw: bytes) -> None:
        seen["accepted" if check_parse(raw) is not None else "refused"] += 1

    check()
    assert seen["accepted"] > 0 and seen["refused"] > 0, seen
    figures("hostile parser", **seen)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Society]:
    society = Society(tmp_path_factory.mktemp("hostile") / "home")
    society.start_hub()
    try:
        yield society
    finally:
        society.stop_all()


def raw_request(
    method: str, path: str, headers: dict[str, str], body: bytes | None, chunked: bool = False
) -> bytes:
    """A request's exact bytes: any header value, any body, chunked or not; the server closes after."""
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    payload = b""
    if body is not None:
        if chunked:
            head.append("Transfer-Encoding: chunked")
            payload = (
                f"{len(body):x}\r\n".encode() + body + b"\r\n" if body else b""
            ) + b"0\r\n\r\n"
        else:
            head.append(f"Content-Length: {len(body)}")
            payload = body
    return "\r\n".join(head).encode("utf-8", "surrogateescape") + b"\r\n\r\n" + payload


def raw_exchange(
    port: int, request: bytes, timeout: float = 60
) -> tuple[int, dict[str, str], bytes]:
    """Send one request, read until the server closes; (status, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = body[: int(headers["content-length"])]
    return status, headers, body


class Answers:
    """Every answer the fuzzers got, checked as it comes; /say 200s are counted for the room check."""

    def __init__(self, society: Society) -> None:
        self.society = society
        self.said = 0
        self.statuses: dict[int, int] = {}

    def send(self, port: int, request: bytes) -> tuple[int, bytes]:
        try:  # a generous deadline: a loaded 2-core machine is slow, a hung hub never answers
            status, _, body = raw_exchange(port, request)
        except TimeoutError:
            raise AssertionError(f"the hub hung on {request[:120]!r} for 60 s") from None
        assert status < 500, f"{request[:200]!r}: {status} {body[:300]!r}"
        self.statuses[status] = self.statuses.get(status, 0) + 1
        is_head = request.startswith(b"HEAD ")
        if status >= 400 and not is_head:
            error = json.loads(body)
            assert isinstance(error.get("error"), str) and isinstance(error.get("message"), str), (
                error
            )
        if status == 200 and request.startswith(b"POST /say "):
            self.said += 1
            assert parse_line(body).seq >= 1
        return status, body


@pytest.fixture(scope="module")
def answers(hub: Society) -> Iterator[Answers]:
    made = Answers(hub)
    yield made
    # Nothing invalid was written: every line was acknowledged, and the room verifies.
    lines = hub.lines()
    assert len(lines) == made.said
    result = audit_file(hub.room)
    assert result.ok, result.summary()
    figures("hostile http", said=made.said, statuses=made.statuses)


def listener(society: Society, relaxed: bool) -> tuple[int, dict[str, str]]:
    if relaxed:
        return society.relaxed_port, {"authorization": f"Bearer {society.token()}"}
    return society.strict_port, society.read_headers()


@pytest.mark.soak
def test_say_endpoint(hub: Society, answers: Answers, soak: bool) -> None:
    """POST /say with hostile bodies and headers on both listeners: never a 5xx or a hang."""

    @settings(
        max_examples=sizes(soak),
        derandomize=not soak,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        body=st.one_of(posts(), posts(), st.binary(max_size=300)),
        relaxed=st.booleans(),
        content_type=st.sampled_from(
            ["application/json", "text/plain", "", "application/json; charset=latin-1"]
        ),
        chunked=st.booleans(),
    )
    def check(body: bytes, relaxed: bool, content_type: str, chunked: bool) -> None:
        port, headers = listener(hub, relaxed)
        headers = {**headers, "content-type": content_type}
        answers.send(port, raw_request("POST", "/say", headers, body, chunked))

    check()
    assert answers.said > 0, "no hostile example got through: the fuzzer is too blunt"


@pytest.mark.soak
def test_read_endpoint(hub: Society, answers: Answers, soak: bool) -> None:
    """GET /read with hostile query strings: never a 5xx; a short long-poll ends on time."""
    values = st.one_of(
        st.integers(min_value=-5, max_value=10**20).map(str),
        st.sampled_from(
            ["nan", "inf", "-0", "1e400", "0x10", "٣", " 1", "", "1" * 5000, "0.05", "0.2"]
        ),
        st.text(max_size=20),
    )

    @settings(
        max_examples=sizes(soak),
        derandomize=not soak,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        params=st.dictionaries(
            st.sampled_from(["after", "limit", "wait", "thread", "to", "from", "x", "after[]"]),
            values,
            max_size=4,
        ),
        relaxed=st.booleans(),
    )
    def check(params: dict[str, str], relaxed: bool) -> None:
        port, headers = listener(hub, relaxed)
        try:
            if float(params.get("wait", "")) > 0.2:
                params["wait"] = "0.2"  # a valid long wait is a correct answer, just slow
        except ValueError:
            pass
        query = "&".join(f"{quote(k)}={quote(v)}" for k, v in params.items())
        answers.send(port, raw_request("GET", f"/read?{query}", headers, None))

    check()


@pytest.mark.soak
def test_every_other_endpoint_and_method(hub: Society, answers: Answers, soak: bool) -> None:
    """Random methods, paths and authorization headers: 2xx or 4xx with a JSON error."""

    @settings(
        max_examples=sizes(soak),
        derandomize=not soak,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]),
        path=st.one_of(
            st.sampled_from(
                [
                    "/say",
                    "/read",
                    "/health",
                    "/openapi.json",
                    "/",
                    "/say/",
                    "//say",
                    "/%00",
                    "/../etc/passwd",
                    "/health?x=1",
                ]
            ),
            st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=30).map(
                lambda p: "/" + quote(p, safe="/?=&")
            ),
        ),
        relaxed=st.booleans(),
        authorization=st.sampled_from(
            [None, "Bearer", "Bearer x", "Basic abc", "bearer  ", "Bearer \u00e9", "Bearer \udcff"]
        ),
        body=st.one_of(st.none(), st.binary(max_size=100)),
    )
    def check(
        method: str, path: str, relaxed: bool, authorization: str | None, body: bytes | None
    ) -> None:
        port, headers = listener(hub, relaxed)
        if authorization is not None:
            headers = {"authorization": authorization}
        answers.send(port, raw_request(method, path, headers, body))

    check()


RAW_GARBAGE = [
    b"\x00\x01\x02\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET / HTTP/9.9\r\n\r\n",
    b"POST /say HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    b"POST /say HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
    b"POST /say HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"POST /say HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
    b'POST /say HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{"a"',  # shorter than declared, then closed
    b"GET /read HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"a" * 100_000 + b"\r\n\r\n",
    b"GET /read?" + b"a=1&" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /say HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n" + b"{" * 100_000,
]


def test_broken_http_and_slow_clients(hub: Society, answers: Answers) -> None:
    """Broken HTTP, oversize headers, a half-sent body and idle connections never stop the hub serving others."""
    host, port = "127.0.0.1", hub.strict_port
    idle = []
    for _ in range(20):  # slow clients: connected, a partial request, then silence
        conn = socket.create_connection((host, port), timeout=5)
        conn.sendall(b'POST /say HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"from":')
        idle.append(conn)
    try:
        for garbage in RAW_GARBAGE:
            with socket.create_connection((host, port), timeout=10) as conn:
                try:
                    conn.sendall(garbage)
                    conn.shutdown(socket.SHUT_WR)
                    reply = b""
                    while chunk := conn.recv(65536):
                        reply += chunk
                except (ConnectionResetError, BrokenPipeError):
                    reply = b""
            if reply:
                status = int(reply.split(b" ", 2)[1])
                assert status < 500, (garbage[:80], reply[:300])
            status, _ = answers.send(port, raw_request("GET", "/health", {}, None))
            assert status == 200
        still = b'{"from":"stranger","to":"@sink","type":"chat","body":"still serving"}'
        status, _ = answers.send(port, raw_request("POST", "/say", {}, still))
        assert status == 200
    finally:
        for conn in idle:
            conn.close()
    wait_for(lambda: hub.healthy(), 10, "the hub to stay healthy")


async def _many_at_once(url: str, n: int) -> list[int]:
    async with httpx.AsyncClient(timeout=20) as client:
        bad = b'{"from":"a","to":"@b","type":"chat","body":"x","data":{"v":1e400}}'
        answers = await asyncio.gather(*(client.post(f"{url}/say", content=bad) for _ in range(n)))
    return [a.status_code for a in answers]


def test_a_burst_of_hostile_posts(hub: Society, answers: Answers) -> None:
    """Two hundred hostile posts at once are all refused with a 4xx, and the hub stays up."""
    statuses = asyncio.run(_many_at_once(hub.strict_url, 200))
    assert set(statuses) == {400}, set(statuses)
    assert hub.healthy()


def test_room_file_is_strict(hub: Society, answers: Answers) -> None:
    """Every line in the room parses strictly and splits on \\n only, whatever ran before."""
    awkward = ["plain", "tab\tand\u2028line separator", "emoji \U0001f600", 'quote " and \\']
    for body in awkward:  # lines of its own, so the check never runs over an empty room
        post = {"from": "stranger", "to": "@echo", "type": "chat", "body": body}
        status, _ = answers.send(
            hub.strict_port, raw_request("POST", "/say", {}, json.dumps(post).encode())
        )
        assert status == 200
    raw = Path(hub.room).read_bytes()
    lines = raw.split(b"\n")[:-1]
    assert len(lines) >= len(awkward)
    assert [parse_line(line).body for line in lines[-len(awkward) :]] == awkward
    for line in lines:
        strictjson.loads(line)
        parse_line(line)


def test_wrong_method_names_the_allowed_one(hub: Society, answers: Answers) -> None:
    """A 405 says which method the endpoint takes, in an Allow header (RFC 9110; schemathesis ST204)."""
    for method, path, allowed in (
        ("TRACE", "/health", "GET"),
        ("GET", "/say", "POST"),
        ("PUT", "/read", "GET"),
    ):
        status, headers, body = raw_exchange(hub.strict_port, raw_request(method, path, {}, None))
        assert status == 405 and headers.get("allow") == allowed, (method, path, headers)
        assert json.loads(body)["error"] == "http"


STRICT_REFUSALS = {
    "NaN": (b'{"from":"a","to":"@b","type":"chat","body":"x","data":{"v":NaN}}', "NaN"),
    "Infinity": (
        b'{"from":"a","to":"@b","type":"chat","body":"x","data":{"v":-Infinity}}',
        "Infinity",
    ),
    "1e400": (b'{"from":"a","to":"@b","type":"chat","body":"x","data":{"v":1e400}}', "finite"),
    "a 5000-digit number": (
        b'{"from":"a","to":"@b","type":"chat","body":"x","data":{"v":' + b"7" * 5000 + b"}}",
        "digits",
    ),
    "a duplicate key": (
        b'{"from":"a","to":"@b","type":"chat","body":"x","body":"y"}',
        "duplicate key",
    ),
    "a lone surrogate": (b'{"from":"a","to":"@b","type":"chat","body":"\\ud800"}', "surrogate"),
    "nesting 33 deep": (
        b'{"from":"a","to":"@b","type":"chat","body":"x","data":'
        + b'{"a":' * 32
        + b"1"
        + b"}" * 33,
        "nesting",
    ),
    "not UTF-8": (b'{"from":"a","to":"@b","type":"chat","body":"\xff"}', "UTF-8"),
}


@pytest.mark.parametrize("what", list(STRICT_REFUSALS))
def test_strict_json_refusals_over_http(hub: Society, answers: Answers, what: str) -> None:
    """Each thing strict JSON forbids is a 400 whose message names it, and nothing is written."""
    raw, named = STRICT_REFUSALS[what]
    before = hub.room.read_bytes()
    status, body = answers.send(hub.strict_port, raw_request("POST", "/say", {}, raw))
    assert status == 400 and named in json.loads(body)["message"], body
    assert hub.room.read_bytes() == before

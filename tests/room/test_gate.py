"""The post gate, through a real hub process on free loopback ports."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from room.message import Post
from tests.conftest import ENGINES
from tests.room.posting import count, fields, post, signed
from tests.support import HTTP, Society, run_cli, society_on, wait_for
from trust.proof import KeySigner, hmac_hex, new_nonce, proof_bytes


@pytest.fixture(scope="module", params=ENGINES)
def hubbed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Society]:
    """One hub per engine: every case below runs against the JSONL room and the stream."""
    society = society_on(
        request.param,
        tmp_path_factory.mktemp("gate") / "home",
        lambda: request.getfixturevalue("nats_server"),
    )
    society.start_hub()
    try:
        yield society
    finally:
        society.stop_all()


class TestStrict:
    def test_privileged_with_proof_is_verified(self, hubbed: Society) -> None:
        """A privileged nick proving the shared secret is stored with verified true."""
        payload = signed(hubbed.secret())
        answer = post(hubbed.strict_url, payload)
        assert answer.status_code == 200, answer.text
        line = answer.json()
        assert line["nonce"] == payload["proof"]["nonce"]  # the room remembers it; not the HMAC
        assert line["verified"] is True
        assert line["from"] == "operator" and line["to"] == "@echo"
        assert set(line) == {
            "seq",
            "id",
            "ts",
            "from",
            "to",
            "type",
            "body",
            "data",
            "in_reply_to",
            "thread",
            "sig",
            "verified",
            "nonce",
            "prev",
        }

    def test_unprivileged_is_written_unverified(self, hubbed: Society) -> None:
        """A nick that is not privileged is written, with verified false."""
        answer = post(hubbed.strict_url, fields("stranger"))
        assert answer.status_code == 200
        assert answer.json()["verified"] is False
        assert hubbed.lines()[-1]["from"] == "stranger"

    def test_privileged_without_proof_is_rejected_and_nothing_written(
        self, hubbed: Society
    ) -> None:
        """Claiming a privileged nick without proof is a 401 and leaves the room as it was."""
        before = hubbed.room.read_bytes()
        answer = post(hubbed.strict_url, fields("echo"))
        assert answer.status_code == 401
        assert answer.json()["error"] == "unauthorized"
        assert "privileged" in answer.json()["message"]
        assert hubbed.room.read_bytes() == before

    def test_wrong_proof_is_rejected(self, hubbed: Society) -> None:
        """An HMAC made with another secret is refused and writes nothing."""
        before = count(hubbed)
        answer = post(hubbed.strict_url, signed(b"not-the-secret" * 4))
        assert answer.status_code == 401
        assert count(hubbed) == before

    def test_altered_body_after_signing_is_rejected(self, hubbed: Society) -> None:
        """Changing the body after the proof was made breaks the proof."""
        payload = signed(hubbed.secret(), body="original")
        payload["body"] = "altered"
        assert post(hubbed.strict_url, payload).status_code == 401

    def test_replayed_proof_is_rejected(self, hubbed: Society) -> None:
        """The same proof twice: the first is stored, the second refused as a replay."""
        payload = signed(hubbed.secret(), body="once only")
        assert post(hubbed.strict_url, payload).status_code == 200
        before = count(hubbed)
        again = post(hubbed.strict_url, payload)
        assert again.status_code == 401
        assert "nonce" in again.json()["message"]
        assert count(hubbed) == before

    # 10 s past the 120 s window either way: a loaded machine's delay between stamping the
    # proof and the hub reading it must not carry a future timestamp back inside the window.
    @pytest.mark.parametrize("skew", [-130, 130, -3600])
    def test_stale_timestamp_is_rejected(self, hubbed: Society, skew: int) -> None:
        """A proof more than 120 s off the hub's clock is refused."""
        payload = fields(body="stale")
        ts, nonce = int(time.time()) + skew, new_nonce()
        mac = hmac_hex(
            hubbed.secret(), proof_bytes(Post.model_validate(payload).signed_fields(), ts, nonce)
        )
        payload["proof"] = {"ts": ts, "nonce": nonce, "hmac": mac}
        answer = post(hubbed.strict_url, payload)
        assert answer.status_code == 401
        assert "clock" in answer.json()["message"]

    def test_own_key_proof_is_verified_and_kept(self, hubbed: Society) -> None:
        """A nick proving with its own Ed25519 key is verified, and its signature stays in the line."""
        new_key = run_cli(hubbed.root, "keys", "new", "scribe")
        assert new_key.returncode == 0, new_key.stderr
        trust = hubbed.root / "trust.toml"
        trust.write_text(trust.read_text() + new_key.stdout)
        # the hub reads trust.toml at start: restart it
        hubbed.stop_all()
        hubbed.start_hub()
        from trust.keys import load_private_key

        key = load_private_key(hubbed.home.trust.key_file("scribe"))
        payload = fields("scribe", body="signed by me")
        payload.update(KeySigner(key).prove(Post.model_validate(payload)))
        answer = post(hubbed.strict_url, payload)
        assert answer.status_code == 200, answer.text
        line = answer.json()
        assert line["verified"] is True and line["sig"]["value"] == payload["sig"]["value"]
        # the shared secret does not speak for a nick with its own key
        assert post(hubbed.strict_url, signed(hubbed.secret(), "scribe")).status_code == 401
        # another nick's key does not either
        other = fields("operator", body="forged")
        other.update(KeySigner(key).prove(Post.model_validate(other)))
        assert post(hubbed.strict_url, other).status_code == 401


class TestReadToken:
    def test_read_needs_the_read_token(self, hubbed: Society) -> None:
        """The strict /read answers 401 naming the token's file without it, and 200 with it."""
        where = str(hubbed.home.trust.read_token_file)
        bare = HTTP.get(f"{hubbed.strict_url}/read", timeout=10)
        assert bare.status_code == 401 and where in bare.json()["message"], bare.text
        for wrong in ("Bearer nope", f"Bearer {hubbed.token()}", "Basic x"):
            answer = HTTP.get(
                f"{hubbed.strict_url}/read", headers={"authorization": wrong}, timeout=10
            )
            assert answer.status_code == 401, (wrong, answer.text)
            assert hubbed.token() not in answer.text
        good = HTTP.get(f"{hubbed.strict_url}/read", headers=hubbed.read_headers(), timeout=10)
        assert good.status_code == 200 and "messages" in good.json()
        # posting and health are unchanged: proofs, not the read token, guard /say
        assert HTTP.get(f"{hubbed.strict_url}/health", timeout=10).status_code == 200
        assert post(hubbed.strict_url, fields("stranger", body="no token")).status_code == 200

    def test_read_token_in_a_post_is_refused(self, hubbed: Society) -> None:
        """The room never stores the read token: a post carrying it is a 400."""
        token = hubbed.home.read_token().decode()
        answer = post(hubbed.strict_url, fields("stranger", body=f"leak {token}"))
        assert answer.status_code == 400 and token not in answer.text


class TestRelaxed:
    def test_no_token_is_rejected(self, hubbed: Society) -> None:
        """Every relaxed request needs the bearer token: posts, reads and health."""
        assert post(hubbed.relaxed_url, fields("stranger")).status_code == 401
        assert HTTP.get(f"{hubbed.relaxed_url}/read").status_code == 401
        assert HTTP.get(f"{hubbed.relaxed_url}/health").status_code == 401
        assert HTTP.get(f"{hubbed.relaxed_url}/nope").status_code == 401  # not even a 404
        assert httpx.delete(f"{hubbed.relaxed_url}/say").status_code == 401
        assert post(hubbed.relaxed_url, fields("stranger"), token="wrong").status_code == 401

    def test_privileged_without_proof_is_verified(self, hubbed: Society) -> None:
        """With the token, a privileged nick may post without proof and is verified."""
        answer = post(
            hubbed.relaxed_url, fields("echo", body="from the sandbox"), token=hubbed.token()
        )
        assert answer.status_code == 200
        assert answer.json()["verified"] is True

    def test_wrong_proof_is_still_rejected(self, hubbed: Society) -> None:
        """An explicit wrong proof is refused even on the relaxed listener."""
        before = count(hubbed)
        answer = post(hubbed.relaxed_url, signed(b"wrong" * 8, "echo"), token=hubbed.token())
        assert answer.status_code == 401
        assert count(hubbed) == before

    def test_unprivileged_stays_unverified(self, hubbed: Society) -> None:
        """The token does not make an unprivileged nick verified."""
        answer = post(hubbed.relaxed_url, fields("stranger"), token=hubbed.token())
        assert answer.status_code == 200 and answer.json()["verified"] is False


class TestBadInput:
    @pytest.mark.parametrize("field", ["seq", "id", "ts", "verified", "prev"])
    def test_hub_owned_field_is_rejected(self, hubbed: Society, field: str) -> None:
        """A post may not set a field only the hub sets; the error names it."""
        before = count(hubbed)
        answer = post(hubbed.strict_url, {**fields("stranger"), field: True})
        assert answer.status_code == 400
        assert field in answer.json()["message"]
        assert count(hubbed) == before

    @pytest.mark.parametrize(
        ("raw", "needle"),
        [
            (b"{not json", "not acceptable JSON"),
            (b"[1, 2]", "JSON object"),
            (
                b'{"from": "a", "from": "b", "to": "@x", "type": "chat", "body": ""}',
                "duplicate key",
            ),
            (
                b'{"from": "stranger", "to": "@x", "type": "chat", "body": "x", "data": {"n": NaN}}',
                "NaN",
            ),
            (b'{"from": "stranger", "to": "@x", "type": "chat", "body": "\\ud800"}', "surrogate"),
            (
                b'{"from": "stranger", "to": "@x", "type": "chat", "body": "x", "data": '
                + b'{"a":' * 40
                + b"1"
                + b"}" * 41,
                "nesting",
            ),
            (b"\xff\xfe", "UTF-8"),
        ],
    )
    def test_malformed_json_is_rejected(self, hubbed: Society, raw: bytes, needle: str) -> None:
        """Text that is not strict JSON gets a 400 that says what is wrong."""
        answer = post(hubbed.strict_url, None, raw=raw)
        assert answer.status_code == 400
        assert needle in answer.json()["message"]

    @pytest.mark.parametrize(
        ("change", "needle"),
        [
            ({"colour": "blue"}, "unknown field 'colour'"),
            ({"from": "Bad Nick"}, "not a nick"),
            ({"from": "x" * 33}, "not a nick"),
            ({"to": "@Nope!"}, "not a nick"),
            ({"type": "shout"}, "type must be one of"),
            ({"data": [1, 2]}, "data"),
            ({"thread": "has space"}, "thread"),
        ],
    )
    def test_bad_fields_are_rejected(
        self, hubbed: Society, change: dict[str, Any], needle: str
    ) -> None:
        """Unknown fields, bad nicks and unknown types get a 400 naming the field."""
        answer = post(hubbed.strict_url, {**fields("stranger"), **change})
        assert answer.status_code == 400, answer.text
        assert needle in answer.json()["message"]

    def test_missing_field_is_named(self, hubbed: Society) -> None:
        """A post without a body says the body is required."""
        payload = fields("stranger")
        del payload["body"]
        answer = post(hubbed.strict_url, payload)
        assert answer.status_code == 400 and "body" in answer.json()["message"]

    def test_oversized_body_is_413(self, hubbed: Society) -> None:
        """A body over 64 KiB is refused with 413 and nothing written."""
        before = count(hubbed)
        answer = post(hubbed.strict_url, fields("stranger", body="x" * (64 * 1024 + 1)))
        assert answer.status_code == 413
        assert "64 KiB" in answer.json()["message"]
        assert count(hubbed) == before

    def test_body_at_the_limit_is_accepted(self, hubbed: Society) -> None:
        """Exactly 64 KiB of body is still a valid post."""
        answer = post(hubbed.strict_url, fields("stranger", body="x" * (64 * 1024)))
        assert answer.status_code == 200

    def test_oversized_data_is_413(self, hubbed: Society) -> None:
        """Data over 256 KiB is refused with 413."""
        answer = post(hubbed.strict_url, fields("stranger", data={"blob": "y" * (256 * 1024)}))
        assert answer.status_code == 413
        assert "256 KiB" in answer.json()["message"]

    def test_huge_request_is_413_without_reading_it_all(self, hubbed: Society) -> None:
        """A request over the hub's size cap is refused by its declared length."""
        answer = post(hubbed.strict_url, None, raw=b" " * (3 * 1024 * 1024))
        assert answer.status_code == 413

    def test_to_is_normalized(self, hubbed: Society) -> None:
        """A bare nick in `to` is stored as @nick."""
        answer = post(hubbed.strict_url, {**fields("stranger"), "to": "echo"})
        assert answer.json()["to"] == "@echo"

    def test_unknown_endpoint_and_method_are_json_4xx(self, hubbed: Society) -> None:
        """Wrong paths and methods answer with a JSON error, never a 500."""
        missing = HTTP.get(f"{hubbed.strict_url}/nope")
        assert missing.status_code == 404 and missing.json()["error"] == "http"
        wrong = HTTP.get(f"{hubbed.strict_url}/say")
        assert wrong.status_code == 405 and "message" in wrong.json()

    @pytest.mark.parametrize(
        "query",
        [
            "after=-1",
            "after=x",
            "limit=0",
            "limit=5000",
            "limit=%2B5",
            "after=90233604601739135156224",
            "limit=%205",
            "wait=100",
            "to=Bad!",
            "from=Bad!",
            "bogus=1",
        ],
    )
    def test_bad_read_parameters_are_400(self, hubbed: Society, query: str) -> None:
        """Every malformed /read parameter gets a 400 that names it."""
        answer = HTTP.get(f"{hubbed.strict_url}/read?{query}", headers=hubbed.read_headers())
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == "bad_request"
        assert query.split("=")[0] in answer.json()["message"]

    @pytest.mark.parametrize(
        "proof",
        [
            {"ts": 1, "nonce": "abcdefgh", "hmac": "00"},
            {"ts": 1, "nonce": "abc", "hmac": "0" * 64},
            {"ts": 1, "nonce": "abcdefgh", "hmac": "0" * 64, "extra": 1},
            "not an object",
        ],
    )
    def test_a_malformed_proof_is_a_wrong_proof(self, hubbed: Society, proof: object) -> None:
        """A proof that is not even well formed is refused as unauthorized, on both listeners."""
        before = count(hubbed)
        strict = post(hubbed.strict_url, {**fields(), "proof": proof})
        relaxed = post(hubbed.relaxed_url, {**fields("echo"), "proof": proof}, hubbed.token())
        assert strict.status_code == relaxed.status_code == 401, strict.text + relaxed.text
        assert "proof" in strict.json()["message"]
        assert count(hubbed) == before

    def test_a_signature_from_a_nick_without_a_key_names_the_fix(self, hubbed: Society) -> None:
        """The refusal tells the operator the exact trust.toml line to add, for this nick."""
        sig = {"ts": int(time.time()), "nonce": new_nonce(), "value": "AAAA"}
        answer = post(hubbed.strict_url, {**fields("stranger"), "sig": sig})
        assert answer.status_code == 401
        assert 'stranger = "ed25519:' in answer.json()["message"], answer.text
        malformed = post(hubbed.strict_url, {**fields("stranger"), "sig": {"ts": "x"}})
        assert malformed.status_code == 401 and "signature" in malformed.json()["message"]

    def test_a_post_carrying_a_secret_is_refused_without_repeating_it(
        self, hubbed: Society
    ) -> None:
        """Neither the shared secret nor the token may enter the room, escaped or not."""
        before = count(hubbed)
        secret, token = hubbed.secret().decode().strip(), hubbed.token().strip()
        escaped = "".join(f"\\u{ord(c):04x}" for c in secret).encode()
        attempts = [
            post(hubbed.strict_url, fields("stranger", body=f"leak {secret}")),
            post(hubbed.strict_url, fields("stranger", data={"t": token})),
            post(hubbed.strict_url, {**fields("stranger"), token: 1}),
            post(
                hubbed.strict_url,
                None,
                raw=b'{"from":"stranger","to":"@echo","type":"chat","body":"' + escaped + b'"}',
            ),
            HTTP.get(
                f"{hubbed.strict_url}/read",
                headers=hubbed.read_headers(),
                params={"thread": secret},
            ),
        ]
        for answer in attempts:
            assert answer.status_code == 400, answer.text
            assert secret not in answer.text and token not in answer.text
        assert count(hubbed) == before

    def test_from_filter_takes_a_bare_or_at_nick(self, hubbed: Society) -> None:
        """/read?from= accepts `alice` and `@alice` alike, as `to` does."""
        post(hubbed.strict_url, fields("stranger", body="from a stranger"))
        for sender in ("stranger", "@stranger"):
            answer = HTTP.get(
                f"{hubbed.strict_url}/read",
                headers=hubbed.read_headers(),
                params={"from": sender},
                timeout=10,
            )
            assert answer.status_code == 200, answer.text
            messages = answer.json()["messages"]
            assert messages and all(m["from"] == "stranger" for m in messages)


class TestRead:
    def test_read_filters_and_last_seq(self, hubbed: Society) -> None:
        """/read returns lines after a seq, filtered by thread, to and from."""
        for n in range(3):
            post(hubbed.strict_url, fields("stranger", body=f"t{n}", thread="read-test"))
        answer = HTTP.get(
            f"{hubbed.strict_url}/read",
            headers=hubbed.read_headers(),
            params={"thread": "read-test"},
        ).json()
        assert [m["body"] for m in answer["messages"]] == ["t0", "t1", "t2"]
        assert answer["last_seq"] == hubbed.lines()[-1]["seq"]
        first = answer["messages"][0]["seq"]
        after = HTTP.get(
            f"{hubbed.strict_url}/read",
            headers=hubbed.read_headers(),
            params={"thread": "read-test", "after": first},
        ).json()
        assert [m["body"] for m in after["messages"]] == ["t1", "t2"]
        limited = HTTP.get(
            f"{hubbed.strict_url}/read",
            headers=hubbed.read_headers(),
            params={"thread": "read-test", "limit": 1},
        ).json()
        assert len(limited["messages"]) == 1 and limited["last_seq"] == first
        mine = HTTP.get(
            f"{hubbed.strict_url}/read",
            headers=hubbed.read_headers(),
            params={"from": "stranger", "to": "@echo", "thread": "read-test"},
        ).json()
        assert len(mine["messages"]) == 3

    def test_long_poll_wakes_on_a_new_line(self, hubbed: Society) -> None:
        """A waiting /read returns as soon as a matching line arrives."""
        import threading

        head = HTTP.get(f"{hubbed.strict_url}/health").json()["seq"]
        result: dict[str, Any] = {}

        def reader() -> None:
            started = time.monotonic()
            answer = HTTP.get(
                f"{hubbed.strict_url}/read",
                headers=hubbed.read_headers(),
                params={"after": head, "wait": 20, "thread": "poll"},
                timeout=30,
            )
            result["answer"] = answer.json()
            result["took"] = time.monotonic() - started

        def waiting() -> int:
            return int(HTTP.get(f"{hubbed.strict_url}/health").json()["readers_waiting"])

        assert waiting() == 0
        thread = threading.Thread(target=reader)
        thread.start()
        wait_for(lambda: waiting() == 1, 15, "the reader to be waiting in its long-poll")
        post(hubbed.strict_url, fields("stranger", body="noise"))
        post(hubbed.strict_url, fields("stranger", body="wanted", thread="poll"))
        thread.join(30)
        assert [m["body"] for m in result["answer"]["messages"]] == ["wanted"]
        assert result["took"] < 15

    def test_long_poll_times_out_empty(self, hubbed: Society) -> None:
        """A waiting /read with nothing new returns an empty list after the wait."""
        head = HTTP.get(f"{hubbed.strict_url}/health").json()["seq"]
        answer = HTTP.get(
            f"{hubbed.strict_url}/read",
            headers=hubbed.read_headers(),
            params={"after": head, "wait": 0.3, "thread": "silent"},
            timeout=10,
        ).json()
        assert answer["messages"] == [] and answer["last_seq"] >= head

    def test_openapi_schema_is_served(self, hubbed: Society) -> None:
        """The hub describes itself at /openapi.json."""
        schema = HTTP.get(f"{hubbed.strict_url}/openapi.json").json()
        tlog = {"/tlog/checkpoint", "/tlog/proof/inclusion", "/tlog/proof/consistency"}
        objects = "/objects/{sha256}"  # room/objectstore.py
        assert set(schema["paths"]) == {"/say", "/read", "/health", "/tlog/cosign", *tlog, objects}

"""Suite 6: nothing but a proven, privileged poster is ever stamped verified.

Bad posts of every kind a forger or a replayer could try are generated from
seeded randomness: a wrong secret, another nick's key, the shared secret for
a nick that has its own key, body / other fields / ts / nonce altered after
signing, a stale ts, a replayed request, a privileged nick with no proof, a
post claiming `verified` or another hub field, garbage signatures and MACs,
a wrong bearer token, an unprivileged nick with a valid proof (written, but
never verified). Valid posts are mixed in and must all be verified.

The bulk goes through the real Gate in-process (CI 100,000, --soak
1,000,000); a share goes through a real hub over HTTP (CI 5,000, --soak
100,000) and the room is read back. Replays are tried across hub restarts.
"""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from room import strictjson
from room.errors import PostRejected
from room.message import parse_request
from tests.reliability.helpers import Seeded, exchange, figures, http_request
from tests.support import HTTP, Society, run_cli, set_hub
from trust import keys, table
from trust.gate import Gate
from trust.nonces import NonceStore
from trust.proof import hmac_hex, proof_bytes

SIGNED_FIELDS = ("from", "to", "type", "body", "data", "in_reply_to", "thread")


@dataclass
class Attempt:
    kind: str
    payload: dict[str, Any]
    relaxed: bool = False
    token: str | None = None  # the bearer token sent (relaxed listener only)
    expect: str = "refused"  # or "unverified"; valid posts expect "verified"

    @property
    def raw(self) -> bytes:
        return strictjson.dumps(self.payload).encode()


class Forger:
    """Makes valid and bad posts for a home with `operator` (secret) and `alice`, `bob` (own keys)."""

    def __init__(
        self,
        rng: Seeded,
        secret: bytes,
        token: str,
        nick_keys: dict[str, Ed25519PrivateKey],
        clock: Callable[[], float],
        skew: int = 100,
    ) -> None:
        self.rng = rng
        self.skew = skew  # how far a fresh proof's ts may be off the clock (the hub allows 120)
        self.secret = secret
        self.token = token
        self.keys = nick_keys
        self.clock = clock
        self.n = 0
        self.proven: list[Attempt] = []  # valid attempts with a proof, to replay later
        self.kinds: dict[str, Callable[[], Attempt]] = {
            "wrong secret": self.wrong_secret,
            "another nick's key": self.another_key,
            "shared secret for a nick with its own key": self.secret_for_key_nick,
            "a key for a secret nick": self.key_for_secret_nick,
            "body altered after signing": self.altered_body,
            "another field altered after signing": self.altered_field,
            "ts altered after signing": self.altered_ts,
            "nonce altered after signing": self.altered_nonce,
            "stale ts": self.stale,
            "replayed request": self.replayed,
            "privileged nick without proof (strict)": self.no_proof,
            "claims verified": self.claims_verified,
            "claims another hub field": self.claims_hub_field,
            "garbage signature": self.garbage_sig,
            "garbage mac": self.garbage_mac,
            "wrong bearer token": self.wrong_token,
            "both proof and sig": self.both,
            "signature by a nick with no key": self.sig_unknown_nick,
            "unprivileged nick with a valid proof": self.unprivileged_proof,
            "unprivileged nick through relaxed": self.unprivileged_relaxed,
        }

    # -- building blocks ----------------------------------------------------

    def fields(self, sender: str, tag: str) -> dict[str, Any]:
        self.n += 1
        rng = self.rng
        out: dict[str, Any] = {
            "from": sender,
            "to": f"@{rng.choice(['echo', 'foreman', 'sink'])}",
            "type": rng.choice(["ask", "chat", "reply"]),
            "body": f"{tag} {self.n} " + rng.choice(["", "é", "\u2028", "日本", "x" * 50]),
            "data": rng.choice([None, {"n": self.n}, {"deep": {"list": [1, 2.5, None]}}]),
            "in_reply_to": rng.choice([None, f"ID{self.n}"]),
            "thread": rng.choice([None, "run-1", f"t-{self.n % 7}"]),
        }
        return out

    def ts(self) -> int:
        return int(self.clock()) + self.rng.randint(-self.skew, self.skew)

    def nonce(self) -> str:
        return base64.urlsafe_b64encode(self.rng.randbytes(12)).decode().rstrip("=")

    def hmac(
        self, fields: dict[str, Any], secret: bytes | None = None, **over: Any
    ) -> dict[str, Any]:
        ts, nonce = over.get("ts", self.ts()), over.get("nonce", self.nonce())
        mac = hmac_hex(secret or self.secret, proof_bytes(fields, ts, nonce))
        return {**fields, "proof": {"ts": ts, "nonce": nonce, "hmac": mac}}

    def sig(self, fields: dict[str, Any], signer: str, **over: Any) -> dict[str, Any]:
        ts, nonce = over.get("ts", self.ts()), over.get("nonce", self.nonce())
        value = keys.sign(self.keys[signer], proof_bytes(fields, ts, nonce))
        return {**fields, "sig": {"ts": ts, "nonce": nonce, "value": value}}

    def valid(self) -> Attempt:
        how = self.rng.randrange(4)
        if how == 0:
            attempt = Attempt(
                "valid", self.hmac(self.fields("operator", "good")), expect="verified"
            )
        elif how == 1:
            nick = self.rng.choice(["alice", "bob"])
            attempt = Attempt("valid", self.sig(self.fields(nick, "good"), nick), expect="verified")
        elif how == 2:  # the relaxed listener: the token vouches for a privileged nick
            nick = self.rng.choice(["operator", "alice"])
            attempt = Attempt("valid", self.fields(nick, "good"), True, self.token, "verified")
        else:  # a proof on the relaxed listener is still checked, and still fine
            attempt = Attempt(
                "valid", self.sig(self.fields("bob", "good"), "bob"), True, self.token, "verified"
            )
        if "proof" in attempt.payload or "sig" in attempt.payload:
            self.proven.append(attempt)
        return attempt

    def signed_bad(self, sender: str) -> dict[str, Any]:
        """A correctly signed bad-tagged post (HMAC for operator, own key for alice and bob)."""
        fields = self.fields(sender, "bad")
        return self.hmac(fields) if sender == "operator" else self.sig(fields, sender)

    def relaxed_maybe(self, payload: dict[str, Any], kind: str) -> Attempt:
        if self.rng.random() < 0.3:
            return Attempt(kind, payload, True, self.token)
        return Attempt(kind, payload)

    # -- the bad kinds --------------------------------------------------------

    def wrong_secret(self) -> Attempt:
        other = self.rng.randbytes(32).hex().encode()
        payload = self.hmac(self.fields("operator", "bad"), other)
        return self.relaxed_maybe(payload, "wrong secret")

    def another_key(self) -> Attempt:
        payload = self.sig(self.fields("alice", "bad"), "bob")
        return self.relaxed_maybe(payload, "another nick's key")

    def secret_for_key_nick(self) -> Attempt:
        payload = self.hmac(self.fields(self.rng.choice(["alice", "bob"]), "bad"))
        return self.relaxed_maybe(payload, "shared secret for a nick with its own key")

    def key_for_secret_nick(self) -> Attempt:
        payload = self.sig(self.fields("operator", "bad"), "alice")
        return self.relaxed_maybe(payload, "a key for a secret nick")

    def altered_body(self) -> Attempt:
        payload = self.signed_bad(self.rng.choice(["operator", "alice", "bob"]))
        payload["body"] = payload["body"] + self.rng.choice([" ", "!", "\u200b", " altered"])
        return self.relaxed_maybe(payload, "body altered after signing")

    def altered_field(self) -> Attempt:
        payload = self.signed_bad(self.rng.choice(["operator", "alice", "bob"]))
        name = self.rng.choice(["to", "type", "data", "in_reply_to", "thread", "from"])
        payload[name] = {
            "to": "@operator" if payload["to"] != "@operator" else "@echo",
            "type": "system" if payload["type"] != "system" else "chat",
            "data": {"injected": True},
            "in_reply_to": "ID-OTHER" if payload["in_reply_to"] != "ID-OTHER" else None,
            "thread": "other-run" if payload["thread"] != "other-run" else None,
            "from": {"operator": "alice", "alice": "bob", "bob": "operator"}[payload["from"]],
        }[name]
        return self.relaxed_maybe(payload, "another field altered after signing")

    def altered_ts(self) -> Attempt:
        payload = self.signed_bad(self.rng.choice(["operator", "alice", "bob"]))
        part = "proof" if "proof" in payload else "sig"
        payload[part] = {**payload[part], "ts": payload[part]["ts"] + self.rng.choice([-1, 1, 60])}
        return self.relaxed_maybe(payload, "ts altered after signing")

    def altered_nonce(self) -> Attempt:
        payload = self.signed_bad(self.rng.choice(["operator", "alice", "bob"]))
        part = "proof" if "proof" in payload else "sig"
        payload[part] = {**payload[part], "nonce": self.nonce()}
        return self.relaxed_maybe(payload, "nonce altered after signing")

    def stale(self) -> Attempt:
        skew = self.rng.choice([-1, 1]) * self.rng.randint(121, 10**7)
        fields = self.fields(self.rng.choice(["operator", "alice"]), "bad")
        ts = int(self.clock()) + skew
        payload = (
            self.hmac(fields, ts=ts)
            if fields["from"] == "operator"
            else self.sig(fields, "alice", ts=ts)
        )
        return self.relaxed_maybe(payload, "stale ts")

    def replayed(self) -> Attempt:
        if not self.proven:
            return self.no_proof()  # nothing sent yet that carries a proof to replay
        original = self.rng.choice(self.proven)
        return Attempt("replayed request", original.payload, original.relaxed, original.token)

    def no_proof(self) -> Attempt:
        fields = self.fields(self.rng.choice(["operator", "alice", "bob"]), "bad")
        return Attempt("privileged nick without proof (strict)", fields)

    def claims_verified(self) -> Attempt:
        sender = self.rng.choice(["mallory", "operator", "alice"])
        payload = self.rng.choice([self.fields(sender, "bad"), self.signed_bad("operator")])
        payload["verified"] = True
        return self.relaxed_maybe(payload, "claims verified")

    def claims_hub_field(self) -> Attempt:
        payload = self.fields(self.rng.choice(["mallory", "operator"]), "bad")
        name = self.rng.choice(["seq", "id", "ts", "prev"])
        payload[name] = {"seq": 1, "id": "X", "ts": "2026-01-01T00:00:00.000Z", "prev": "0" * 64}[
            name
        ]
        return self.relaxed_maybe(payload, "claims another hub field")

    def garbage_sig(self) -> Attempt:
        payload = self.signed_bad(self.rng.choice(["alice", "bob"]))
        payload["sig"]["value"] = self.rng.choice(
            [
                base64.b64encode(self.rng.randbytes(64)).decode(),
                base64.b64encode(self.rng.randbytes(self.rng.randint(1, 100))).decode(),
                "not base64!",
                payload["sig"]["value"][:-4] + "AAA=",
                "",
            ]
        )
        return self.relaxed_maybe(payload, "garbage signature")

    def garbage_mac(self) -> Attempt:
        payload = self.signed_bad("operator")
        payload["proof"]["hmac"] = self.rng.choice(
            [self.rng.randbytes(32).hex(), "0" * 64, "z" * 64, self.rng.randbytes(31).hex(), ""]
        )
        return self.relaxed_maybe(payload, "garbage mac")

    def wrong_token(self) -> Attempt:
        payload = self.fields(self.rng.choice(["operator", "alice", "mallory"]), "bad")
        token = self.rng.choice([None, "", "wrong", self.token[:-1], self.token + "x"])
        return Attempt("wrong bearer token", payload, True, token)

    def both(self) -> Attempt:
        payload = self.hmac(self.fields("operator", "bad"))
        payload.update(
            {
                k: v
                for k, v in self.sig(self.fields("operator", "bad"), "alice").items()
                if k == "sig"
            }
        )
        return self.relaxed_maybe(payload, "both proof and sig")

    def sig_unknown_nick(self) -> Attempt:
        payload = self.sig(self.fields(self.rng.choice(["mallory", "operator"]), "bad"), "alice")
        return self.relaxed_maybe(payload, "signature by a nick with no key")

    def unprivileged_proof(self) -> Attempt:
        payload = self.hmac(self.fields("mallory", "bad"))
        attempt = self.relaxed_maybe(payload, "unprivileged nick with a valid proof")
        attempt.expect = "unverified"
        return attempt

    def unprivileged_relaxed(self) -> Attempt:
        payload = self.fields(self.rng.choice(["mallory", "eve"]), "bad")
        return Attempt("unprivileged nick through relaxed", payload, True, self.token, "unverified")

    def attempts(self, count: int) -> list[Attempt]:
        """`count` bad attempts of every kind in turn, with valid ones mixed in (about 1 in 10)."""
        out: list[Attempt] = []
        names = list(self.kinds)
        for n in range(count):
            if self.rng.random() < 0.1:
                out.append(self.valid())
            out.append(self.kinds[names[n % len(names)]]())
        return out


def write_trust(path: Path, nick_keys: dict[str, Ed25519PrivateKey]) -> None:
    """Make alice and bob privileged with their own keys in a home's trust.toml."""
    text = path.read_text()
    lines = [f'{nick} = "{keys.public_text(key)}"' for nick, key in nick_keys.items()]
    path.write_text(text.rstrip("\n") + "\n" + "\n".join(lines) + "\n")


def judge_in_process(gate: Gate, attempt: Attempt) -> str:
    try:
        if attempt.relaxed:
            gate.check_bearer(None if attempt.token is None else f"Bearer {attempt.token}")
        verified = gate.judge(parse_request(attempt.raw), attempt.relaxed)
    except PostRejected:
        return "refused"
    return "verified" if verified else "unverified"


@pytest.fixture
def nick_keys() -> dict[str, Ed25519PrivateKey]:
    return {"alice": Ed25519PrivateKey.generate(), "bob": Ed25519PrivateKey.generate()}


@pytest.mark.soak
def test_bad_posts_through_the_gate(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], soak: bool, rng: Seeded
) -> None:
    """Hundreds of thousands of bad posts through the real Gate: none verified, every valid one verified."""
    count = 1_000_000 if soak else 100_000
    write_trust(society.root / "trust.toml", nick_keys)
    trust = table.load(society.root / "trust.toml")
    now = 1_800_000_000.0
    gate = Gate(
        trust,
        society.secret(),
        society.token().encode(),
        NonceStore(None, clock=lambda: now),
        clock=lambda: now,
    )
    forger = Forger(rng, society.secret(), society.token(), nick_keys, lambda: now)
    outcomes: Counter[tuple[str, str]] = Counter()
    started = time.monotonic()
    for attempt in forger.attempts(count):
        got = judge_in_process(gate, attempt)
        outcomes[(attempt.kind, got)] += 1
        assert got == attempt.expect, (
            f"{attempt.kind}: {got}, not {attempt.expect} (seed {rng.seed_value}): {attempt.raw[:300]!r}"
        )
    bad = sum(n for (kind, _), n in outcomes.items() if kind != "valid")
    assert bad >= count
    assert not [key for key in outcomes if key[0] != "valid" and key[1] == "verified"]
    figures(
        "authentication in-process",
        bad=bad,
        valid=sum(n for (kind, _), n in outcomes.items() if kind == "valid"),
        kinds=len(forger.kinds),
        seconds=round(time.monotonic() - started, 1),
    )


@pytest.mark.soak
def test_bad_posts_through_the_hub(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], soak: bool, rng: Seeded
) -> None:
    """Bad posts over HTTP to both listeners: refused or written unverified; the room shows 0 verified bad lines."""
    count = 100_000 if soak else 5_000
    write_trust(society.root / "trust.toml", nick_keys)
    # The gate is under test, not the stranger limits (tests/room/test_flood.py): thousands of
    # unverified posts at full speed would be answered 429.
    set_hub(
        society.root,
        unverified_nick_posts_per_s=0,
        unverified_total_posts_per_s=0,
        unverified_nick_bytes_per_s=0,
        unverified_total_bytes_per_s=0,
    )
    society.start_hub()
    # Fresh proofs are made just before they are sent, a chunk at a time, within 30 s of now.
    forger = Forger(rng, society.secret(), society.token(), nick_keys, time.time, skew=30)
    attempts: list[Attempt] = []
    answers: dict[int, tuple[int, bytes]] = {}
    started = time.monotonic()
    made = 0
    while made < count:
        chunk = forger.attempts(min(2_000, count - made))
        made += min(2_000, count - made)
        base = len(attempts)
        attempts += chunk
        requests = []
        for attempt in chunk:
            headers = {} if attempt.token is None else {"authorization": f"Bearer {attempt.token}"}
            requests.append(http_request("POST", "/say", attempt.raw, headers))
        # In order within each listener, so a replay comes after the post it replays.
        for url, relaxed in ((society.strict_url, False), (society.relaxed_url, True)):
            indexes = [i for i, a in enumerate(chunk) if a.relaxed == relaxed]
            got = asyncio.run(exchange(url, [requests[i] for i in indexes], connections=1))
            answers.update((base + i, answer) for i, answer in zip(indexes, got, strict=True))
    elapsed = time.monotonic() - started
    outcomes: Counter[tuple[str, str]] = Counter()
    written: dict[str, Attempt] = {}
    for index, attempt in enumerate(attempts):
        status, body = answers[index]
        assert status < 500, f"{attempt.kind}: HTTP {status} {body[:300]!r}"
        if status == 200:
            line = json.loads(body)
            got = "verified" if line["verified"] else "unverified"
            written[line["body"]] = attempt
        else:
            got = "refused"
            error = json.loads(body)
            assert error["error"] and error["message"], body
        outcomes[(attempt.kind, got)] += 1
        assert got == attempt.expect, (
            f"{attempt.kind}: {got}, not {attempt.expect} (seed {rng.seed_value})"
        )
    lines = society.lines()
    assert len(lines) == len(written)
    for line in lines:
        attempt = written[line["body"]]
        assert line["verified"] == (attempt.expect == "verified"), line
    assert not [m for m in lines if m["body"].startswith("bad ") and m["verified"]]
    bad = sum(n for (kind, _), n in outcomes.items() if kind != "valid")
    figures(
        "authentication through the hub",
        bad=bad,
        valid=sum(n for (kind, _), n in outcomes.items() if kind == "valid"),
        bad_written_unverified=sum(1 for m in lines if m["body"].startswith("bad ")),
        requests_per_s=round(len(attempts) / elapsed),
    )


def replayable(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], rng: Seeded
) -> list[bytes]:
    """Post two valid proven requests (HMAC and own key); return their exact bytes."""
    forger = Forger(rng, society.secret(), society.token(), nick_keys, time.time)
    raws = [
        Attempt("valid", forger.hmac(forger.fields("operator", "good"))).raw,
        Attempt("valid", forger.sig(forger.fields("alice", "good"), "alice")).raw,
    ]
    for raw in raws:
        answer = HTTP.post(f"{society.strict_url}/say", content=raw, timeout=10)
        assert answer.status_code == 200 and answer.json()["verified"] is True
    return raws


def assert_replays_refused(society: Society, raws: list[bytes]) -> None:
    for raw in raws:
        answer = HTTP.post(f"{society.strict_url}/say", content=raw, timeout=10)
        assert answer.status_code == 401, answer.text
        assert "already used" in answer.json()["message"]


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_replay_across_a_restart(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], how: str, rng: Seeded
) -> None:
    """A proof used before a restart (clean or SIGKILL) is refused after it."""
    write_trust(society.root / "trust.toml", nick_keys)
    hub = society.start_hub()
    raws = replayable(society, nick_keys, rng)
    if how == "sigterm":
        assert hub.stop() == 0
    else:
        hub.signal(signal.SIGKILL)
        hub.proc.wait(10)
    society.start_hub()
    assert_replays_refused(society, raws)


def test_replay_after_a_second_hub_was_refused(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], rng: Seeded
) -> None:
    """A second hub that is refused the room must not disturb the first hub's nonce journal."""
    write_trust(society.root / "trust.toml", nick_keys)
    first = society.start_hub()
    second = society.spawn("hub-2", "hub")
    assert second.proc.wait(20) == 1 and "another hub" in second.output()
    raws = replayable(society, nick_keys, rng)  # journaled by the first hub after that
    assert first.stop() == 0
    society.start_hub()
    assert_replays_refused(society, raws)


def test_authorship_is_auditable_without_secrets(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], tmp_path: Path, rng: Seeded
) -> None:
    """A nick's own signature stays in its line; audit verifies it from trust.toml alone and names an altered line."""
    write_trust(society.root / "trust.toml", nick_keys)
    hub = society.start_hub()
    replayable(society, nick_keys, rng)
    forger = Forger(rng, society.secret(), society.token(), nick_keys, time.time)
    for _ in range(5):
        raw = Attempt("valid", forger.sig(forger.fields("bob", "good"), "bob")).raw
        assert HTTP.post(f"{society.strict_url}/say", content=raw, timeout=10).status_code == 200
    assert hub.stop() == 0
    lines = society.lines()
    signed = [m for m in lines if m["from"] in nick_keys]
    assert len(signed) == 6 and all(m["sig"] and m["verified"] for m in signed)
    assert all(m["sig"] is None for m in lines if m["from"] == "operator")  # HMACs are never stored
    # An auditor's copy: the room and trust.toml with public keys only, no secrets at all.
    auditor = tmp_path / "auditor"
    auditor.mkdir()
    (auditor / "room.jsonl").write_bytes(society.room.read_bytes())
    trust_text = (society.root / "trust.toml").read_text()
    (auditor / "trust.toml").write_text(trust_text)
    done = run_cli(auditor, "audit", str(auditor / "room.jsonl"))
    assert (
        done.returncode == 0
        and done.stdout.strip() == f"ok: {len(lines)} lines"
        and "signatures: 6 verified" in done.stderr
    ), done.stdout + done.stderr
    # Edit the last signed line (the last line: the chain alone cannot see it).
    target = signed[-1]
    assert target["seq"] == len(lines)
    edited = [json.dumps(m, ensure_ascii=False, separators=(",", ":")).encode() for m in lines]
    target["body"] = target["body"] + " (edited)"
    edited[-1] = json.dumps(target, ensure_ascii=False, separators=(",", ":")).encode()
    (auditor / "room.jsonl").write_bytes(b"".join(line + b"\n" for line in edited))
    done = run_cli(auditor, "audit", str(auditor / "room.jsonl"))
    assert done.returncode == 1
    assert f"FAILED at seq {target['seq']}:" in done.stdout and "signature" in done.stdout


def test_a_legacy_nonce_journal_is_still_honoured_and_no_longer_written(
    society: Society, nick_keys: dict[str, Ed25519PrivateKey], rng: Seeded
) -> None:
    """A home from before nonces moved into the lines kept them in `room.jsonl.nonces`: a hub
    started on it refuses those proofs (the upgrade reopens no window), and writes no more."""
    write_trust(society.root / "trust.toml", nick_keys)
    forger = Forger(rng, society.secret(), society.token(), nick_keys, time.time)
    raws = [
        Attempt("valid", forger.hmac(forger.fields("operator", "old"))).raw,
        Attempt("valid", forger.sig(forger.fields("alice", "old"), "alice")).raw,
    ]
    journal = society.room.with_name(society.room.name + ".nonces")
    society.room.parent.mkdir(parents=True, exist_ok=True)
    records = []
    for raw in raws:
        proof = json.loads(raw).get("proof") or json.loads(raw)["sig"]
        records.append(f"{proof['ts']} {proof['nonce']}\n")
    journal.write_text("".join(records))
    before = journal.read_bytes()
    society.start_hub()
    assert_replays_refused(society, raws)
    replayable(society, nick_keys, rng)
    assert journal.read_bytes() == before

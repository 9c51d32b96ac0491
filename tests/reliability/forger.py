"""Valid and forged posts for the authentication suite (tests/reliability/test_authentication.py).

A Forger makes every kind of bad post a forger or a replayer could try (a wrong secret,
another nick's key, fields altered after signing, stale or replayed proofs, garbage
signatures, a wrong bearer token), with valid ones mixed in, from seeded randomness.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from room import strictjson
from tests.reliability.helpers import Seeded
from trust import keys
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

"""The post gate: decides `verified`, or refuses a post before anything is written.

    strict listener    privileged nick: a valid proof is required (else 401)
                       other nicks: written with verified false
    relaxed listener   a bearer token is required on every request (else 401)
                       privileged nick without proof: verified
    both               any proof or signature given must be valid, fresh and unused

A valid proof from a nick that is not privileged still yields verified false:
`verified` means "the hub proved this poster is who it says, and that poster
is privileged", nothing more.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable

from room.errors import BadPost, Unauthorized
from room.message import VIA_RELAXED, PostRequest
from trust import keys
from trust.nonces import NonceStore
from trust.proof import hmac_hex, proof_bytes
from trust.screen import Screen
from trust.table import SECRET, TrustTable

WINDOW_S = 120


class Gate:
    def __init__(
        self,
        table: TrustTable,
        secret: bytes | None,
        relaxed_token: bytes | None,
        nonces: NonceStore,
        window_s: int = WINDOW_S,
        clock: Callable[[], float] = time.time,
        screen: Screen | None = None,
        read_token: bytes | None = None,
    ) -> None:
        self.table = table
        self.digest: str | None = None  # of the trust.toml the table came from (/health)
        self._secret = secret
        self._token = relaxed_token
        self._nonces = nonces
        self._window = window_s
        self._clock = clock
        self._read_token = read_token
        # The home's whole secret set (trust/screen.py); without one, at least these.
        self._screen = screen or Screen.of(
            [
                (secret, "the shared secret"),
                (relaxed_token, "the relaxed token"),
                (read_token, "the read token"),
            ]
        )

    def retable(self, table: TrustTable, screen: Screen, digest: str) -> None:
        """Take up trust.toml read again (SIGHUP): its [privileged] from the next post on.
        The secret, the tokens and the nonces stay those the hub started with."""
        self.table, self._screen, self.digest = table, screen, digest

    def refuse_secrets(self, content: bytes) -> None:
        """Refuse a request carrying a secret of this home or any private key: the room
        stores no secret.

        The message names neither which secret nor where, so the refusal
        itself repeats nothing and tells a prober nothing.
        """
        if self._screen.find(content) is not None:
            raise BadPost(
                "the request contains secret material (one of this hub's secrets or tokens, "
                "a key of its home, or a PEM private key block); nothing was written. Remove "
                "it and post again: the room must never hold a secret, and a secret that "
                "was sent anywhere should be replaced"
            )

    def check_bearer(self, header: str | None) -> None:
        """The relaxed listener's door: every request carries the endpoint token."""
        if self._token is None:
            raise Unauthorized("this listener has no token configured; no request can pass")
        scheme, _, value = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not value:
            raise Unauthorized(
                "the relaxed listener needs 'Authorization: Bearer <token>' "
                "(the token is in the relaxed_token_file named by trust.toml)"
            )
        if not hmac.compare_digest(value.strip().encode(), self._token):
            raise Unauthorized("the bearer token is wrong")

    def check_reader(self, header: str | None) -> None:
        """The strict listener's /read: the room is read only with the home's read token.

        Without it any local user could read the whole room over HTTP, though the
        file itself is private. A gate built without a read token leaves reads open.
        """
        if self._read_token is None:
            return
        where = self.table.read_token_file
        scheme, _, value = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not value:
            raise Unauthorized(
                f"reading the room needs 'Authorization: Bearer <read token>'; the token is "
                f"in {where} (read_token_file in trust.toml), readable only by the home's user"
            )
        if not hmac.compare_digest(value.strip().encode(), self._read_token):
            raise Unauthorized(
                f"the read token is wrong; send the one in {where} (read_token_file in trust.toml)"
            )

    @property
    def judges_at_once(self) -> bool:
        """True when `judge` needs no await: this hub's own nonce store, not a shared one."""
        return self._nonces.synchronous

    def judge(self, request: PostRequest, relaxed: bool) -> bool:
        """Return `verified` for this post, or raise Unauthorized / BadPost."""
        verified, fresh = self._judge(request, relaxed)
        if fresh is not None and not self._nonces.reserve(fresh[1], fresh[0]):
            raise _replayed()
        return verified

    async def admit(self, request: PostRequest, relaxed: bool) -> bool:
        """`judge` for the hub: the nonce store may be shared by several hubs and asynchronous.

        Every check but the nonce runs first, so a forged post never costs a
        round trip to a shared store (trust/streamnonces.py).
        """
        verified, fresh = self._judge(request, relaxed)
        if fresh is not None and not await self._nonces.reserve_async(fresh[1], fresh[0]):
            raise _replayed()
        return verified

    @staticmethod
    def admitted_via(request: PostRequest, relaxed: bool, verified: bool) -> str | None:
        """The mark a stored line keeps of how it was admitted, where no proof stays in it.

        A verified post with a `sig` carries its own evidence; one admitted on the
        relaxed listener's token alone carries `via: "relaxed"`, so an audit can
        tell it from a line appended behind the hub's back (trust/audit.py).
        """
        if verified and relaxed and request.proof is None and request.post.sig is None:
            return VIA_RELAXED
        return None

    def _judge(self, request: PostRequest, relaxed: bool) -> tuple[bool, tuple[int, str] | None]:
        """`verified`, and the (ts, nonce) still to reserve; raise on anything else wrong."""
        post, proof, sig = request.post, request.proof, request.post.sig
        nick = post.from_
        how = self.table.proof_of(nick)
        if proof is not None and sig is not None:
            raise BadPost("send either proof (shared secret) or sig (own key), not both")
        if proof is not None:
            if how is not None and how.method != SECRET:
                raise Unauthorized(
                    f"{nick} proves with its own key (trust.toml); the shared secret "
                    "does not speak for it: sign with its key instead"
                )
            if self._secret is None:
                raise Unauthorized(
                    "the hub has no shared secret configured; it cannot check proofs"
                )
            expected = hmac_hex(
                self._secret, proof_bytes(post.signed_fields(), proof.ts, proof.nonce)
            )
            if not hmac.compare_digest(expected, proof.hmac):
                raise Unauthorized(
                    f"the proof for {nick} is wrong: the post was altered or the secret differs"
                )
            self._check_clock(proof.ts)
            return how is not None, (proof.ts, proof.nonce)
        if sig is not None:
            if how is None or how.public_key is None:
                raise Unauthorized(
                    f"{nick} has no public key in trust.toml, so its signature cannot be "
                    f'checked; add `{nick} = "ed25519:..."` under [privileged] or post without sig'
                )
            message = proof_bytes(post.signed_fields(), sig.ts, sig.nonce)
            if not keys.verify(how.public_key, message, sig.value):
                raise Unauthorized(
                    f"the signature for {nick} is wrong: the post was altered or the key differs"
                )
            self._check_clock(sig.ts)
            return True, (sig.ts, sig.nonce)
        if how is None:
            return False, None
        if relaxed:
            return True, None
        raise Unauthorized(
            f"{nick} is privileged: its posts to this listener must carry a proof "
            "(post with `bullpen say --as` from a home holding the secret or key, "
            "or through the relaxed listener with its token)"
        )

    def _check_clock(self, ts: int) -> None:
        skew = abs(self._clock() - ts)
        if skew > self._window:
            raise Unauthorized(
                f"the proof's timestamp is {int(skew)} s off the hub's clock (limit "
                f"{self._window} s); check both clocks and sign again"
            )


def _replayed() -> Unauthorized:
    return Unauthorized("the proof's nonce was already used; a proof is good for one post")

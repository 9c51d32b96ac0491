"""Asking a hub for its checkpoint, proofs and a line's exact bytes (`bullpen verify`, witnesses).

Nothing the hub answers is trusted here: callers check every note and
proof against keys they hold (trust/tlogverify.py). A hub that is down or
refuses says so as a HubUnavailable / PostRejected with the hub's reason.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from room.errors import HubUnavailable, PostRejected
from room.httpverify import verify_tls
from room.reader import seq_of
from trust.tlogverify import decode_proof


class TlogClient:
    """A reader of one hub's /tlog endpoints (the read token is its bearer)."""

    def __init__(self, url: str, read_token: bytes | None, timeout: float = 15.0) -> None:
        headers = {"authorization": f"Bearer {read_token.decode()}"} if read_token else {}
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, verify=verify_tls(self.url)
        )

    def close(self) -> None:
        self._http.close()

    def _get(self, path: str, params: dict[str, Any] | None = None) -> httpx.Response:
        try:
            response = self._http.get(path, params=params)
        except httpx.HTTPError as exc:
            raise HubUnavailable(
                f"cannot reach the hub at {self.url} ({type(exc).__name__}); is it running?"
            ) from None
        self._raise_for(response)
        return response

    def _raise_for(self, response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        try:
            said = response.json().get("message")
        except (ValueError, AttributeError):
            said = None
        said = said if isinstance(said, str) else response.text[:300]
        if response.status_code >= 500:
            raise HubUnavailable(f"the hub at {self.url} answered {response.status_code}: {said}")
        refused = PostRejected(f"the hub at {self.url} refused: {said}")
        refused.status = response.status_code
        raise refused

    def checkpoint(self) -> str:
        return self._get("/tlog/checkpoint").text

    def inclusion(self, seq: int, size: int) -> list[bytes]:
        answer = self._get("/tlog/proof/inclusion", {"seq": seq, "size": size}).json()
        return decode_proof(answer.get("proof"))

    def consistency(self, old: int, new: int) -> list[bytes]:
        answer = self._get("/tlog/proof/consistency", {"from": old, "to": new}).json()
        return decode_proof(answer.get("proof"))

    def line(self, seq: int) -> bytes:
        """Line `seq`'s exact bytes, cut from /read's frame (`{"messages":[<line>],...}`)."""
        body = self._get("/read", {"after": seq - 1, "limit": 1}).content
        head, tail = b'{"messages":[', b'],"last_seq":'
        cut = body.rfind(tail)
        raw = body[len(head) : cut] if body.startswith(head) and cut > 0 else b""
        if not raw or seq_of(raw) != seq:
            raise HubUnavailable(f"the hub at {self.url} has no line {seq} to give")
        return raw

    def cosign(self, note_text: str, witness_key: str) -> int:
        try:
            response = self._http.post(
                "/tlog/cosign",
                content=json.dumps({"checkpoint": note_text, "witness_key": witness_key}),
                headers={"content-type": "application/json"},
            )
        except httpx.HTTPError as exc:
            raise HubUnavailable(f"cannot reach the hub at {self.url} ({exc})") from None
        self._raise_for(response)
        return int(response.json().get("cosignatures", 0))

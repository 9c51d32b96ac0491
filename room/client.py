"""Talking to the room: post and read through a hub, or read a local room file.

A client posts as one nick and proves itself with that nick's signer (the
shared secret or its own key) when it has one. A post is retried only when
the hub could not be reached at all, since then it certainly was not stored;
any other transport failure is reported, because the post may have landed.

A post waits for the hub's own answer (up to POST_ANSWER_S), not just the
client's timeout: a JetStream hub gives NATS 30 s, then answers 503 and
exits, so nothing lands later (docs/scaling.md). A client that gave up
sooner could not tell the poster when reading the room would settle
whether the post was stored.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import httpx

from room import strictjson
from room.durable import durable_end
from room.errors import BadPost, HubUnavailable, PostRejected, Unauthorized
from room.httpverify import verify_tls
from room.log import Filter
from room.message import Message, Post, normalize_to, parse_request_obj
from room.reader import RoomFile, seq_of
from trust.proof import Signer

CONNECT_RETRIES = 5
# Longer than a hub takes to answer a post at worst: the JetStream nonce store's 15 s, the
# stream's 30 s deadline plus one 5 s attempt, and 5 s for its view to show the line.
POST_ANSWER_S = 70.0


def _rejection(response: httpx.Response) -> PostRejected:
    try:
        body = response.json()
        message = body.get("message") or response.text
    except (ValueError, AttributeError):
        message = response.text or f"HTTP {response.status_code}"
    if response.status_code == 401:
        return Unauthorized(message)
    return BadPost(message, status=response.status_code)


class RoomClient:
    """An asynchronous client of one hub listener."""

    def __init__(
        self,
        url: str,
        *,
        nick: str | None = None,
        signer: Signer | None = None,
        token: bytes | str | None = None,
        timeout: float = 10.0,
    ) -> None:
        headers = {"content-type": "application/json"}
        if token:
            text = token.decode() if isinstance(token, bytes) else token
            headers["authorization"] = f"Bearer {text.strip()}"
        self.url = url.rstrip("/")
        self.nick = nick
        self._signer = signer
        self._timeout = timeout
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(timeout),
            verify=verify_tls(self.url),
        )
        self._post_timeout = httpx.Timeout(timeout, read=max(timeout, POST_ANSWER_S))

    def use_proof(self, signer: Signer | None, token: bytes | str | None = None) -> None:
        """Prove later posts with `signer` (and send `token`, when given): what a poster does
        once trust.toml or its key changed under it (agents/runtime/refused.py)."""
        self._signer = signer
        if token:
            text = token.decode() if isinstance(token, bytes) else token
            self._http.headers["authorization"] = f"Bearer {text.strip()}"

    async def __aenter__(self) -> RoomClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def build(
        self,
        to: str,
        body: str,
        *,
        type: str = "chat",
        data: dict[str, Any] | None = None,
        in_reply_to: str | None = None,
        thread: str | None = None,
        nick: str | None = None,
    ) -> Post:
        """The post as the hub will see it; raise BadPost before sending one it would refuse."""
        sender = nick or self.nick
        if sender is None:
            raise ValueError("this client has no nick to post as; pass nick=")
        return parse_request_obj(
            {
                "from": sender,
                "to": to,
                "type": type,
                "body": body,
                "data": data,
                "in_reply_to": in_reply_to,
                "thread": thread,
            }
        ).post

    async def say(self, to: str, body: str, **fields: Any) -> dict[str, Any]:
        """Post and return the stored line; raise PostRejected or HubUnavailable."""
        return await self.send(self.build(to, body, **fields))

    async def send(self, post: Post) -> dict[str, Any]:
        delay = 0.2
        for attempt in range(CONNECT_RETRIES + 1):
            payload = post.signed_fields()
            if self._signer is not None:
                payload.update(self._signer.prove(post))  # fresh ts and nonce per attempt
            try:
                response = await self._http.post(
                    "/say",
                    content=strictjson.dumps(payload).encode(),
                    timeout=self._post_timeout,
                )
            except httpx.ConnectError as exc:
                if attempt == CONNECT_RETRIES:
                    raise HubUnavailable(
                        f"cannot reach the hub at {self.url} ({exc}); is it running? "
                        "Start it with `bullpen hub` or `bullpen up`"
                    ) from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            except httpx.TransportError as exc:
                raise HubUnavailable(
                    f"the hub at {self.url} did not answer the post ({type(exc).__name__}); "
                    "it may or may not have been stored: make sure the hub is running (a hub "
                    "that stopped stores nothing more), then read the room before posting again"
                ) from None
            return self._answer(response)
        raise AssertionError("unreachable")

    def _answer(self, response: httpx.Response) -> dict[str, Any]:
        if response.status_code == 200:
            return response.json()  # type: ignore[no-any-return]
        if 400 <= response.status_code < 500:
            raise _rejection(response)
        try:
            said = response.json().get("message")
        except (ValueError, AttributeError):
            said = None
        raise HubUnavailable(
            f"the hub at {self.url} answered {response.status_code}: "
            f"{said if isinstance(said, str) else response.text[:500]}"
        )

    async def read(
        self,
        after: int = 0,
        limit: int = 100,
        *,
        thread: str | None = None,
        to: str | None = None,
        sender: str | None = None,
        senders: Iterable[str] | None = None,
        verified: bool | None = None,
        wait: float = 0,
    ) -> tuple[list[dict[str, Any]], int]:
        """Lines after `after`, and the seq to pass as `after` next time.

        `senders`: only lines from these nicks; `verified`: only lines the gate
        did (True) or did not (False) verify. The hub filters, so lines a reader
        would drop anyway never cross the wire.
        """
        params: dict[str, Any] = {"after": after, "limit": limit}
        if thread:
            params["thread"] = thread
        if to:
            params["to"] = normalize_to(to)
        if sender:
            params["from"] = sender
        elif senders is not None:
            named = sorted(set(senders))
            if not named:  # from nobody: nothing can match
                return [], int((await self.health())["seq"])
            params["from"] = named
        if verified is not None:
            params["verified"] = "true" if verified else "false"
        if wait:
            params["wait"] = wait
        timeout = httpx.Timeout(self._timeout, read=wait + self._timeout)
        try:
            response = await self._http.get("/read", params=params, timeout=timeout)
        except httpx.TransportError as exc:
            raise HubUnavailable(
                f"cannot read from the hub at {self.url} ({type(exc).__name__}); is it running?"
            ) from None
        answer = self._answer(response)
        return answer["messages"], answer["last_seq"]

    async def health(self) -> dict[str, Any]:
        try:
            response = await self._http.get("/health")
        except httpx.TransportError as exc:
            raise HubUnavailable(f"cannot reach the hub at {self.url} ({exc})") from None
        if response.status_code in (200, 503):
            return response.json()  # type: ignore[no-any-return]
        raise _rejection(response)

    async def follow(
        self,
        after: int = 0,
        *,
        thread: str | None = None,
        to: str | None = None,
        sender: str | None = None,
        wait: float = 25.0,
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield every matching line after `after`, forever, long-polling the hub."""
        filters: dict[str, str | None] = {"thread": thread, "to": to, "sender": sender}
        given: dict[str, Any] = {
            name: value for name, value in filters.items() if value is not None
        }
        delay = 0.2
        while True:
            try:
                lines, last = await self.read(after, 500, wait=wait, **given)
            except HubUnavailable:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.2
            for line in lines:
                yield line
            after = max(after, last)


def read_file(
    path: Path, after: int = 0, limit: int | None = None, flt: Filter | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Read a local room file directly: the lines after `after` that match."""
    flt = flt or Filter()
    needles = flt.prefilter()
    found: list[dict[str, Any]] = []
    last = after
    with RoomFile(path) as room:
        end = durable_end(path, room.size())  # only what the hub has made durable
        for _, raw in room.lines_from(room.offset_after(after, end), end):
            last = max(last, seq_of(raw))
            if needles and not all(n in raw for n in needles):
                continue
            obj = json.loads(raw)
            if flt.matches(
                obj.get("from", ""),
                obj.get("to", ""),
                obj.get("thread"),
                obj.get("verified") is True,
            ):
                found.append(obj)
                if limit is not None and len(found) >= limit:
                    break
    return found, last


async def read_thread(client: RoomClient, thread: str) -> list[Message]:
    """Every verified message of a thread, in order, read page by page from the hub."""
    found: list[Message] = []
    after = 0
    while True:
        lines, last = await client.read(after, 500, thread=thread)
        found += [m for m in map(Message.model_validate, lines) if m.verified]
        if not lines or last <= after:
            return found
        after = last

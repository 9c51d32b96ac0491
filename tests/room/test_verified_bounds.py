"""Verified posts are bounded too: a rate per nick and a disk reserve (issue 33, "Bounds").

The relaxed token let its holder post verified lines at 38 MB/s with no rate or disk bound
(9.5 times what every unverified poster together may write). A real hub, over HTTP: past a
verified nick's bucket a post gets 429 naming the nick, the bound and when to retry
(Retry-After), nothing written; the strict listener's signed posts meet the same rule; under
the verified reserve every post is refused with 507.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from room.errors import HubUnavailable, PostRejected
from tests.support import Society, set_hub, wait_for

MiB = 1024 * 1024


def relaxed_post(client: httpx.Client, n: int, nick: str = "operator") -> httpx.Response:
    """A verified post of about 320 KB through the relaxed listener (no proof: the token)."""
    payload = {
        "from": nick,
        "to": "@sink",
        "type": "chat",
        "body": f"bulk {n} " + "x" * 60_000,
        "data": {"blob": "y" * 250_000},
    }
    return client.post("/say", json=payload)


@pytest.mark.long
def test_the_relaxed_token_cannot_flood_the_room_with_verified_lines(society: Society) -> None:
    """At the default bounds: the flood is refused once the nick's bucket is spent, and what
    it wrote is no more than the bucket (40 MiB) plus its refill (4 MiB/s) meanwhile."""
    society.start_hub()
    headers = {"authorization": f"Bearer {society.token()}"}
    refused: httpx.Response | None = None
    sent = 0
    started = time.monotonic()
    with httpx.Client(base_url=society.relaxed_url, headers=headers, timeout=60) as client:
        for n in range(600):  # 190 MB if nothing stops it
            answer = relaxed_post(client, n)
            if answer.status_code != 200:
                refused = answer
                break
            assert answer.json()["verified"] is True
            sent += 1
        elapsed = time.monotonic() - started
        assert refused is not None, f"{sent} verified posts of 320 KB went in, none refused"
        assert refused.status_code == 429, refused.text
        error = refused.json()
        assert error["error"] == "rate_limited" and "operator" in error["message"]
        assert int(refused.headers["retry-after"]) >= 1
        room_bytes = society.room.stat().st_size
        assert room_bytes <= 40 * MiB + 4 * MiB * elapsed + 400_000, (room_bytes, elapsed)
        lines = len(society.lines())
        assert lines == sent  # the refused post wrote nothing
        # Another verified nick has its own bucket: the operator's flood does not silence it.
        other = relaxed_post(client, 0, nick="foreman")
        assert other.status_code == 200 and other.json()["verified"] is True


def test_a_verified_nick_over_its_bound_gets_429_with_retry_after(society: Society) -> None:
    """Signed (strict) and token (relaxed) posts share the nick's bucket; the error says who,
    what bound, and when; nothing is written; /health counts it."""
    set_hub(society.root, verified_nick_posts_per_s=0.01, verified_burst_s=300)  # 3 posts
    society.start_hub()

    async def run() -> list[str]:
        outcomes = []
        async with society.home.client("operator") as strict:  # HMAC-signed
            for n in range(2):
                stored = await strict.say("@everyone", f"signed {n}")
                assert stored["verified"] is True
                outcomes.append("stored")
        async with society.home.client("operator", relaxed=True) as relaxed:
            for n in range(2):
                try:
                    await relaxed.say("@everyone", f"token {n}")
                    outcomes.append("stored")
                except PostRejected as exc:
                    outcomes.append(f"{exc.status}: {exc.message}")
        async with society.home.client("operator") as strict:
            try:
                await strict.say("@everyone", "signed again")
                outcomes.append("stored")
            except PostRejected as exc:
                outcomes.append(f"{exc.status}: {exc.message}")
        return outcomes

    outcomes = asyncio.run(run())
    assert outcomes[:3] == ["stored"] * 3, outcomes
    assert all(o.startswith("429: ") for o in outcomes[3:]), outcomes
    assert "operator" in outcomes[3] and "0.01 posts/s" in outcomes[3]
    assert len(society.lines()) == 3
    raw = httpx.post(
        f"{society.relaxed_url}/say",
        headers={"authorization": f"Bearer {society.token()}"},
        json={"from": "operator", "to": "@everyone", "type": "chat", "body": "again"},
        timeout=10,
    )
    assert raw.status_code == 429
    body = raw.json()
    assert body["error"] == "rate_limited" and body["nick"] == "operator"
    assert body["retry_after_s"] > 0 and int(raw.headers["retry-after"]) >= 1
    assert len(society.lines()) == 3
    health = httpx.get(f"{society.strict_url}/health", timeout=10).json()
    assert health["verified_refused"] == 3


def test_the_disk_reserve_applies_to_verified_posts(society: Society) -> None:
    """Under the verified reserve even the operator's post is refused 507, nothing written."""
    set_hub(society.root, min_free_disk_bytes=1 << 62, verified_min_free_disk_bytes=1 << 61)
    society.start_hub()

    refused = httpx.post(  # the relaxed token's post: verified
        f"{society.relaxed_url}/say",
        headers={"authorization": f"Bearer {society.token()}"},
        json={"from": "operator", "to": "@everyone", "type": "chat", "body": "is there room?"},
        timeout=10,
    )
    assert refused.status_code == 507, refused.text
    message = refused.json()["message"]
    assert refused.json()["error"] == "disk_low" and "every post, verified or not" in message

    async def run() -> str:  # a signed post: the client says the hub refused it
        async with society.home.client("operator") as client:
            try:
                await client.say("@everyone", "is there room?")
            except HubUnavailable as exc:
                return exc.message
        return "stored"

    assert "507" in asyncio.run(run())
    assert society.lines() == []


def test_a_lurker_over_its_bound_waits_and_still_answers_every_ask(society: Society) -> None:
    """echo may post 2 lines, then one every 2 s: four asks at once are all answered, the
    last two after the hub's 429s, which the lurker waits out (never a dropped reply)."""
    set_hub(society.root, verified_nick_posts_per_s=0.5, verified_burst_s=4)
    society.start_hub()
    echo = society.start_lurker("echo")

    async def ask_four() -> list[str]:
        ids = []
        for nick in ("operator", "foreman"):  # two askers: each within its own bucket
            async with society.home.client(nick) as client:
                for n in range(2):
                    stored = await client.say("@echo", f"ping {nick} {n}", type="ask")
                    ids.append(stored["id"])
        return ids

    asked = asyncio.run(ask_four())
    wait_for(
        lambda: (
            {m.get("in_reply_to") for m in society.lines() if m["from"] == "echo"} >= set(asked)
        ),
        60,
        "echo to answer all four asks",
    )
    assert "over the hub's rate bound; retrying" in echo.own_output()
    replies = [m for m in society.lines() if m["from"] == "echo"]
    assert len(replies) == 4 and all(m["verified"] for m in replies)

"""Helpers for the memory tests: posting saves and asks, and reading the answers back."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx

from room.message import Post
from tests.support import Proc, Society, add_nick, wait_for
from trust.proof import SecretSigner

EXTRA_NAMESPACES = {
    "/bullpen/opsx": "a sibling that must never match /bullpen/ops",
    "/bullpen/ops/deploy": "a child of /bullpen/ops",
}


def start_lurkers(society: Society, *nicks: str) -> list[Proc]:
    """Start several lurkers at once (their imports overlap), then wait for each."""
    procs = [society.spawn(f"lurk-{nick}", "lurk", nick) for nick in nicks]
    for nick, proc in zip(nicks, procs, strict=True):
        wait_for(lambda p=proc: "lurking" in p.output() or not p.alive(), 40, f"{nick} to start")
        assert proc.alive(), f"lurker {nick} exited:\n{proc.output()}"
    return procs


def declare(root: Path, namespaces: dict[str, str]) -> None:
    """Add namespaces to [memory.namespaces] of a home's society.toml."""
    path = root / "society.toml"
    lines = "".join(f'"{ns}" = "{meaning}"\n' for ns, meaning in namespaces.items())
    text = path.read_text()
    assert "[memory.namespaces]\n" in text
    path.write_text(text.replace("[memory.namespaces]\n", "[memory.namespaces]\n" + lines, 1))


def add_member(root: Path, nick: str, **config: Any) -> None:
    """One more lurker nick, trusted and privileged, with its own lessons namespace."""
    add_nick(root, nick, **config)
    declare(root, {f"/bullpen/lessons-learned/{nick}": f"lessons for @{nick}"})


def post(
    society: Society,
    to: str,
    body: str,
    *,
    sender: str = "operator",
    signed: bool = True,
    **fields: Any,
) -> dict[str, Any]:
    payload = {"from": sender, "to": to, "type": fields.pop("type", "ask"), "body": body, **fields}
    if signed:
        payload.update(SecretSigner(society.secret()).prove(Post.model_validate(payload)))
    answer = httpx.post(f"{society.strict_url}/say", json=payload, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def replies_to(society: Society, ask_id: str) -> list[dict[str, Any]]:
    return [m for m in society.lines() if m.get("in_reply_to") == ask_id]


def wait_reply(society: Society, ask_id: str, timeout: float = 20) -> dict[str, Any]:
    return wait_for(
        lambda: (replies_to(society, ask_id) or [None])[0], timeout, f"a reply to {ask_id}"
    )


def save(society: Society, ns: str | None, text: str, **extra: Any) -> dict[str, Any]:
    """Save through the room as the operator; the librarian's reply."""
    entry: dict[str, Any] = {"text": text, **extra}
    if ns is not None:
        entry["ns"] = ns
    sent = post(society, "@librarian", f"remember: {text[:40]}", data={"save": entry})
    return wait_reply(society, sent["id"])


def saved_id(reply: dict[str, Any]) -> str:
    assert not (reply.get("data") or {}).get("failed"), reply["body"]
    return str(reply["data"]["saved"])


def ids(found: list[dict[str, Any]]) -> list[str]:
    return [entry["id"] for entry in found]


def recall_json(result: Any) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def lesson_block_ids(prompt: str) -> list[str]:
    head = prompt.split("\n\n", 1)[0]
    return re.findall(r"^- \[(m\d+)\]", head, re.M)

"""Helpers for the memory tests: posting saves and asks, and reading the answers back."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.support import Proc, Society, add_nick, wait_for
from tests.test_lurker import replies_to, wait_reply
from tests.test_lurker import say as post

# post, replies_to and wait_reply are the lurker tests' own, used here and by the memory tests
__all__ = ["post", "replies_to", "wait_reply"]

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

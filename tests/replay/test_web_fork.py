"""The web view's runs page names a fork's parent, and a parent its forks."""

from __future__ import annotations

from typing import Any

from agents.web import pages
from agents.web.runs import build_runs

TRUSTED = frozenset({"operator", "foreman"})


def start(seq: int, thread: str, **data: Any) -> dict[str, Any]:
    return {
        "seq": seq,
        "id": f"id{seq}",
        "ts": f"2026-12-01T00:00:{seq:02d}.000Z",
        "from": "operator",
        "to": "@foreman",
        "type": "ask",
        "body": "expedition: T (k)",
        "thread": thread,
        "verified": True,
        "data": {"pipeline": "expedition", **data},
    }


def test_a_fork_links_its_parent_and_the_parent_its_fork() -> None:
    threads = {
        "exp-aaaa": [start(1, "exp-aaaa")],
        "exp-bbbb": [start(9, "exp-bbbb", forked_from="exp-aaaa@4", seeded=[])],
        "exp-cccc": [start(12, "exp-cccc", forked_from="not a fork")],
    }
    runs = {run.thread: run for run in build_runs(threads, TRUSTED)}
    assert runs["exp-bbbb"].forked_from == ("exp-aaaa", 4)
    assert runs["exp-aaaa"].forks == ["exp-bbbb"] and runs["exp-aaaa"].forked_from is None
    assert runs["exp-cccc"].forked_from is None
    html = pages.runs(list(runs.values()), "csrf")
    assert 'fork of <a href="/room?thread=exp-aaaa">exp-aaaa</a> at seq 4' in html
    assert 'forked as <a href="/room?thread=exp-bbbb">exp-bbbb</a>' in html

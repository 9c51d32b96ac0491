"""The foreman's Run of a fork: seeded answers count as asked and answered; nothing else does."""

from __future__ import annotations

from typing import Any

from agents.expedition.pipeline import Expedition
from agents.foreman.pipeline import Ask, Run
from room.message import Message

TRUSTED = frozenset({"operator", "foreman", "context", "termgen"})


def start(**data: Any) -> Message:
    return Message.model_validate(
        {
            "seq": 7,
            "id": "start",
            "ts": "2026-12-01T00:00:07.000Z",
            "from": "operator",
            "to": "@foreman",
            "type": "ask",
            "body": "expedition: T (k)",
            "thread": "exp-fork",
            "verified": True,
            "data": {"pipeline": "expedition", "title": "T", "keyword": "k", **data},
        }
    )


CONTEXT = {"context": {"title": "T", "keyword_primary": "k", "kb": "/kb"}, "flags": []}


def test_seeded_steps_are_answered_and_the_pipeline_asks_the_next() -> None:
    seeded = [
        {"key": "context", "nick": "context", "body": "context", "data": CONTEXT},
        {"key": "terms", "nick": "termgen", "body": "terms", "data": {"terms": ["a", "b"]}},
        "not a seed",
        {"key": "retrieve", "nick": "retriever"},  # no body: ignored
    ]
    run = Run([start(forked_from="exp-parent@12", seeded=seeded)], foreman="foreman",
              trusted=TRUSTED, now=0.0)  # fmt: skip
    assert run.keys == {"context", "terms"} and run.pending() == []
    assert run.reply("terms").data == {"terms": ["a", "b"]}  # type: ignore[union-attr]
    (due,) = Expedition().advance(run)
    assert isinstance(due, Ask) and due.key == "retrieve" and due.data["terms"] == ["a", "b"]


def test_seeds_without_forked_from_are_ignored() -> None:
    seeded = [{"key": "context", "nick": "context", "body": "context", "data": CONTEXT}]
    run = Run([start(seeded=seeded)], foreman="foreman", trusted=TRUSTED, now=0.0)
    assert run.keys == set()
    (due,) = Expedition().advance(run)
    assert isinstance(due, Ask) and due.key == "context"

"""What a handler hands back to its lurker, and the base every handler kind shares.

An Outcome is a Reply to post, an Outbox of several posts (the foreman's
asks and reports), or a Failure the lurker posts as `[<nick> FAILED — reason]`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.runtime.step import Reply, StepContext
from room.errors import SecretFound
from room.message import Message
from trust.screen import HomeSecrets, Screen

__all__ = ["Failure", "Handler", "OutPost", "Outbox", "Outcome", "as_outcome", "screened"]


@dataclass(frozen=True)
class OutPost:
    """One post a handler wants made, as its own nick."""

    to: str
    body: str
    type: str = "ask"
    data: dict[str, Any] | None = None
    in_reply_to: str | None = None
    thread: str | None = None


@dataclass(frozen=True)
class Outbox:
    """Several posts instead of one reply: how the foreman speaks."""

    posts: list[OutPost] = field(default_factory=list)


@dataclass(frozen=True)
class Failure:
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


Outcome = Reply | Outbox | Failure


def as_outcome(value: Any) -> Outcome:
    if isinstance(value, Reply | Outbox | Failure):
        return value
    if isinstance(value, str):
        return Reply(value)
    if isinstance(value, dict) and isinstance(value.get("body"), str):
        data = value.get("data")
        return Reply(value["body"], data if isinstance(data, dict) else None)
    return Failure(f"the step returned {type(value).__name__}, not a Reply")


def screened(outcome: Outcome, screen: Screen | HomeSecrets, where: str) -> Outcome:
    """The outcome, or a Failure naming the problem (never the secret) when what it would
    post holds a secret of the home or a private key: the room never receives it."""
    if isinstance(outcome, Failure):  # a failure may quote a program's stderr
        parts: list[Any] = [{"body": outcome.reason, "data": outcome.details}]
    else:
        posts = outcome.posts if isinstance(outcome, Outbox) else [outcome]
        parts = [{"body": post.body, "data": post.data} for post in posts]
    try:
        screen.check_json(parts, where)
    except SecretFound as exc:
        return Failure(exc.message, exc.to_dict())
    return outcome


class Handler:
    """Runs one message through the nick's work, within its timeout."""

    async def run(self, message: Message, ctx: StepContext, timeout: float) -> Outcome:
        raise NotImplementedError

    def tick(self) -> Callable[[StepContext], Any] | None:
        """A periodic hook (the foreman's overdue check), if the handler has one."""
        return None

    def needs_replies(self) -> bool:
        """True for a handler that sequences other nicks and waits for their replies."""
        return False

    def preflight_check(
        self, ctx: StepContext
    ) -> Callable[[dict[str, Any], StepContext], dict[str, Any]] | None:
        """What the handler's step would need here, checked without running it (a pre-flight,
        agents/runtime/preflight.py); None when it has no such check."""
        return None

    def prepare(self, ctx: StepContext) -> None:
        """Load what the handler needs before its first wake (the foreman: its pipelines)."""

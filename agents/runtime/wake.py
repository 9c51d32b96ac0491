"""The five wake rules: when a lurker acts on a message, and when it must not.

A lurker acts on a message only if all hold:
  1. `from` is not itself (never react to your own posts: the loop guard);
  2. `type` is in its wake set: {ask, chat}, plus reply for a reply-waking nick;
  3. `to` is `@<nick>`;
  4. `from` is in TRUST (the invoker allowlist);
  5. `verified` is true (the hub proved the poster).
Only a nick flagged to wake on replies (an orchestrator) ever wakes on a
reply, so plain workers never ping-pong replies forever.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # this module runs in a lone lurker's stdlib idle loop (agents/runtime/lean.py)
    from room.message import Message

DEFAULT_WAKE = frozenset({"ask", "chat"})


def wake_set(wake_replies: bool) -> frozenset[str]:
    return DEFAULT_WAKE | {"reply"} if wake_replies else DEFAULT_WAKE


def refusal(message: Message, nick: str, wake: Set[str], trusted: Set[str]) -> str | None:
    """None when the lurker should act; otherwise the first rule the message fails."""
    if message.from_ == nick:
        return "rule 1: it is our own post"
    if message.type not in wake:
        return f"rule 2: type {message.type!r} is not in the wake set"
    if not message.addressed_to(nick):
        return "rule 3: not addressed to us"
    if message.from_ not in trusted:
        return f"rule 4: {message.from_} is not in TRUST"
    if not message.verified:
        return "rule 5: not verified"
    return None


def certain_refusal(
    line: Mapping[str, Any], nick: str, wake: Set[str], trusted: Set[str]
) -> str | None:
    """The rule a decoded room line surely fails, judged on its raw fields without the
    Message model; None when it may wake the lurker (then `refusal` decides on the model).

    It refuses only what `refusal` would refuse on the same line, or what the model would not
    accept at all: a field of an unexpected kind is left to the model, never refused here.
    """
    sender, kind, to = line.get("from"), line.get("type"), line.get("to")
    if not (isinstance(sender, str) and isinstance(kind, str) and isinstance(to, str)):
        return None
    if sender == nick:
        return "rule 1: it is our own post"
    if kind not in wake:
        return f"rule 2: type {kind!r} is not in the wake set"
    if to.removeprefix("@") != nick:
        return "rule 3: not addressed to us"
    if sender not in trusted:
        return f"rule 4: {sender} is not in TRUST"
    verified = line.get("verified", False)
    if verified is False or verified is None:
        return "rule 5: not verified"
    return None


def orchestrator_problem(nick: str, needs_replies: bool, wake: Set[str]) -> str | None:
    """Why a nick whose handler sequences others (the foreman) must not start: it would not
    wake on the replies it waits for, so every run would deadlock after its first ask."""
    if not needs_replies or "reply" in wake:
        return None
    return (
        f"{nick} runs an orchestrator (it waits for replies) but does not wake on replies: every "
        f"run would deadlock after its first ask. Set wake_replies = true under [nicks.{nick}] "
        "in society.toml (or create the flag file .wakereplies in its state folder)"
    )


def is_ping(message: Message) -> bool:
    return message.type == "ask" and message.data == {"ping": True}

"""A call's worst case, held against its budgets before it is sent (budgets.py).

The prompt's bound is its size in UTF-8 bytes (the messages and any tools
as JSON) plus a template's overhead: byte-level BPE tokenizers (GPT, Llama
3, Qwen, SmolLM2) never make more tokens than bytes, so the backend's count
cannot pass it. The answer's bound is max_tokens for each of the n choices.
A request with no max_tokens is given one when a token or cost budget
applies: what the tightest budget has room for, so even a caller that sets
no bound cannot spend past it. With a price (`[gateway.prices]`) the worst
case has a cost too; with none it is held in tokens only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agents.gateway.config import Price

__all__ = ["TEMPLATE_OVERHEAD", "Worst", "asked_bound", "worst_case"]

TEMPLATE_OVERHEAD = 16  # tokens a chat template may add per message, and once more per call


@dataclass(frozen=True)
class Worst:
    """What a call may spend at most: its prompt's bound, its answer's, and their cost."""

    prompt: int
    completion: int
    price: Price | None = None
    model: str = ""

    @property
    def tokens(self) -> int:
        return self.prompt + self.completion

    @property
    def cost(self) -> float | None:
        return None if self.price is None else self.price.cost(self.prompt, self.completion)


def prompt_bound(body: dict[str, Any]) -> int:
    """At most how many tokens the request's prompt can be, whatever the tokenizer."""
    shown = {k: body[k] for k in ("messages", "tools", "functions") if k in body}
    messages = body.get("messages")
    count = len(messages) if isinstance(messages, list) else 0
    size = len(json.dumps(shown, ensure_ascii=False).encode())
    return size + TEMPLATE_OVERHEAD * (count + 1)


def asked_bound(body: dict[str, Any]) -> int | None:
    """The answer's bound per choice the request sets (the smaller of max_tokens and
    max_completion_tokens), or None when it sets none."""
    bounds = [
        v
        for k in ("max_tokens", "max_completion_tokens")
        if isinstance(v := body.get(k), int) and not isinstance(v, bool) and v > 0
    ]
    return min(bounds) if bounds else None


def choices(body: dict[str, Any]) -> int:
    n = body.get("n")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1


def worst_case(body: dict[str, Any], price: Price | None, model: str) -> Worst:
    """The worst case of `body` as it will be sent (its bound set already, or none)."""
    bound = asked_bound(body)
    return Worst(prompt_bound(body), (bound or 0) * choices(body), price, model)

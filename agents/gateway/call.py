"""One chat completion in progress through the gateway, and the ledger line it ends as.

    {"ts": "2026-12-01T20:41:07.113Z", "id": "9f2c4e1a0b7d3c55", "caller": "scorer",
     "model": "qwen2.5-7b", "backend": "local", "tokens_in": 812, "tokens_out": 64,
     "estimated": false, "latency_ms": 412.5, "status": 200, "flags": [],
     "thread": "exp-1a2b3c4d", "seq": 104, "cost": 0.000101, "finish_reasons": ["stop"],
     "attempts": 2}

`id` is the call's own (a trace's span for it is derived from it,
room/traceids.py); `thread` and `seq` are the run and the room line
of the ask the call was made for, when the seat named them
(`x-bullpen-thread`, `x-bullpen-seq`; and its seat, `x-bullpen-seat`), so the cost page sums a run and a
trace hangs the call under its step. `cost` is there only when the model
has a price, `attempts` only when the gateway retried. No line ever holds a prompt, an answer, a token or a key.
"""

from __future__ import annotations

import math
import re
import secrets
import time
from typing import Any

from agents.gateway.config import Price
from agents.gateway.ledger import now_stamp
from agents.gateway.routing import Route
from agents.gateway.runbudgets import THREAD, RunBudget, parse_budget
from room.errors import BullpenError
from room.traceids import parse_traceparent

__all__ = ["Call", "RunHeaders", "estimate_tokens"]

_SEQ = re.compile(r"[1-9][0-9]{0,15}")


def estimate_tokens(text: str) -> int:
    """About four characters a token: what the ledger says when a backend gives no usage."""
    return math.ceil(len(text) / 4) if text else 0


def _prompt_text(body: dict[str, Any]) -> str:
    parts = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p.get("text", "") for p in content if isinstance(p, dict)]
    return "".join(part for part in parts if isinstance(part, str))


def _a_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53


class BadRunHeader(BullpenError):
    code = "bad_request"
    status = 400


class RunHeaders:
    """The run a call is made for, as the seat names it: the thread and the ask's room seq."""

    def __init__(self, headers: Any) -> None:
        thread = headers.get("x-bullpen-thread")
        seq = headers.get("x-bullpen-seq")
        if thread is not None and not THREAD.fullmatch(thread):
            raise BadRunHeader(
                "x-bullpen-thread is not a thread id (letters, digits, . _ : -, at most 128)"
            )
        if seq is not None and not _SEQ.fullmatch(seq):
            raise BadRunHeader("x-bullpen-seq is not a room seq (a whole number from 1)")
        seat = headers.get("x-bullpen-seat")
        if seat is not None and not THREAD.fullmatch(seat):
            raise BadRunHeader("x-bullpen-seat is not a seat name (letters, digits, . _ : -)")
        self.thread: str | None = thread
        self.seq: int | None = int(seq) if seq is not None else None
        self.seat: str | None = seat
        # The step's span to hang the call under (W3C: one that does not parse is ignored).
        self.parent = parse_traceparent(headers.get("traceparent"))
        budget = headers.get("x-bullpen-budget")
        try:
            self.budget: RunBudget | None = parse_budget(budget[:200]) if budget else None
        except ValueError as exc:
            raise BadRunHeader(f"x-bullpen-budget: {exc}") from None
        if self.budget is not None and thread is None:
            raise BadRunHeader("x-bullpen-budget names a run's budget: send x-bullpen-thread too")


class Call:
    """One chat completion in progress: what the ledger line will say."""

    def __init__(
        self,
        caller: str,
        model: str,
        route: Route,
        body: dict[str, Any],
        run: RunHeaders | None = None,
        price: Price | None = None,
    ) -> None:
        self.id = secrets.token_hex(8)
        self.started = time.monotonic()
        self.caller, self.model, self.route = caller, model, route
        self.run, self.price = run, price
        self.prompt = _prompt_text(body)
        self.tokens_in: int | None = None
        self.tokens_out: int | None = None
        self.answer_chars: list[str] = []
        self.finish_reasons: list[str] = []
        self.status = 200
        self.flags: list[str] = []
        self.attempts = 0

    def tried(self) -> None:
        """One more attempt was sent to the backend (the gateway's own retries count)."""
        self.attempts += 1

    def usage(self, usage: object) -> None:
        """Take the backend's counts; one that is not a whole number >= 0 is estimated instead."""
        if isinstance(usage, dict):
            if _a_count(usage.get("prompt_tokens")):
                self.tokens_in = usage["prompt_tokens"]
            if _a_count(usage.get("completion_tokens")):
                self.tokens_out = usage["completion_tokens"]

    def finished(self, choices: object) -> None:
        """Note the finish_reason of each choice that has one (for the trace's span)."""
        for choice in choices if isinstance(choices, list) else []:
            reason = choice.get("finish_reason") if isinstance(choice, dict) else None
            if isinstance(reason, str) and len(reason) <= 32 and len(self.finish_reasons) < 128:
                self.finish_reasons.append(reason)

    def counted(self) -> tuple[int, int, bool]:
        """(tokens in, tokens out, estimated): the backend's usage, else the gateway's estimate."""
        estimated = self.tokens_in is None or self.tokens_out is None
        tokens_in = self.tokens_in if self.tokens_in is not None else estimate_tokens(self.prompt)
        answer = "".join(self.answer_chars)
        tokens_out = self.tokens_out if self.tokens_out is not None else estimate_tokens(answer)
        return tokens_in, tokens_out, estimated

    def usage_chunk(self, last: dict[str, Any]) -> dict[str, Any]:
        """A stream's usage chunk made from what the gateway counted, for a stream whose own
        usage never came (cut, or a backend that sends none); `estimated` says so."""
        tokens_in, tokens_out, estimated = self.counted()
        return {
            "id": last.get("id", "gateway"),
            "object": "chat.completion.chunk",
            "created": last.get("created", int(time.time())),
            "model": last.get("model", ""),
            "choices": [],
            "usage": {
                "prompt_tokens": tokens_in,
                "completion_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
                "estimated": estimated,
            },
        }

    def entry(self) -> dict[str, Any]:
        tokens_in, tokens_out, estimated = self.counted()
        entry: dict[str, Any] = {
            "ts": now_stamp(),
            "id": self.id,
            "caller": self.caller,
            "model": self.model,
            "backend": self.route.backend,
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "estimated": estimated,
            "latency_ms": round((time.monotonic() - self.started) * 1000, 2),
            "status": self.status,
            "flags": sorted(set(self.flags)),
        }
        if self.run is not None and self.run.seat is not None:
            entry["seat"] = self.run.seat
        if self.run is not None and self.run.thread is not None:
            entry["thread"] = self.run.thread
            if self.run.seq is not None:
                entry["seq"] = self.run.seq
            if self.run.budget is not None:  # the run's own budget, for a restart
                entry["run_budget"] = self.run.budget.model_dump(exclude_none=True)
        if self.price is not None:
            entry["cost"] = round(self.price.cost(tokens_in, tokens_out), 9)
        if self.finish_reasons:
            entry["finish_reasons"] = self.finish_reasons
        if self.attempts > 1:
            entry["attempts"] = self.attempts
        return entry

    @property
    def tokens(self) -> int:
        tokens_in, tokens_out, _ = self.counted()
        return tokens_in + tokens_out

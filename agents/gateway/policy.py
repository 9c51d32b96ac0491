"""Request-level policy, in one place for every client (seed §4.1, failure mode D).

On the way in: the policy's stop strings are added to the request's, and
`max_tokens` is capped. On the way out the answer is *enforced*, not
trusted: a backend may ignore stop strings, and a model may spell a
chat-template marker out as text. The answer is cut at the first stop
string or marker; a marker is flagged TEMPLATE_LEAK, a stop string the
backend ignored STOP_ENFORCED.

Streams are scanned across chunk boundaries: `Scanner.feed` holds back only
the tail that could still grow into a pattern (`<|im_` waits for the next
chunk; `hello` goes out at once), so the first token is not delayed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.gateway.config import PolicyConfig

__all__ = ["STOP_ENFORCED", "TEMPLATE_LEAK", "Policy", "Scanner"]

TEMPLATE_LEAK = "TEMPLATE_LEAK"
STOP_ENFORCED = "STOP_ENFORCED"


@dataclass(frozen=True)
class Policy:
    stop: tuple[str, ...] = ()
    markers: tuple[str, ...] = ()
    max_tokens: int | None = None

    @classmethod
    def of(cls, config: PolicyConfig) -> Policy:
        return cls(tuple(config.stop), tuple(config.markers), config.max_tokens)

    def apply(self, body: dict[str, Any]) -> tuple[str, ...]:
        """Add the stop strings and cap max_tokens in `body`; return every stop to enforce."""
        asked = body.get("stop")
        own = [asked] if isinstance(asked, str) else [s for s in asked or [] if isinstance(s, str)]
        stops = tuple(dict.fromkeys(s for s in [*own, *self.stop] if s))  # "" would cut all
        if stops:
            body["stop"] = list(stops)
        if self.max_tokens is not None:
            for key in ("max_tokens", "max_completion_tokens"):
                value = body.get(key)
                if isinstance(value, int) and value > self.max_tokens:
                    body[key] = self.max_tokens
            if not isinstance(body.get("max_tokens"), int) and "max_completion_tokens" not in body:
                body["max_tokens"] = self.max_tokens
        return stops

    def scanner(self, stops: tuple[str, ...]) -> Scanner:
        return Scanner(stops, self.markers)


@dataclass
class Scanner:
    """Cuts a text, fed in pieces, at the first stop string or marker."""

    stops: tuple[str, ...]
    markers: tuple[str, ...]
    flags: list[str] = field(default_factory=list)
    found: str | None = None  # the pattern the text was cut at
    done: bool = False
    _buffer: str = ""

    def __post_init__(self) -> None:
        self._patterns = tuple(dict.fromkeys([*self.stops, *self.markers]))
        self._longest = max((len(p) for p in self._patterns), default=0)

    def feed(self, text: str) -> str:
        """The part of `text` (with what was held back) that is safe to pass on now."""
        if self.done:
            return ""
        if not self._patterns:
            return text
        buffer = self._buffer + text
        cut = self._first(buffer)
        if cut is not None:
            self._buffer = ""
            self.done = True
            return buffer[:cut]
        hold = self._held(buffer)
        self._buffer = buffer[len(buffer) - hold :] if hold else ""
        return buffer[: len(buffer) - hold]

    def finish(self) -> str:
        """What is still held back, once the answer has ended."""
        rest, self._buffer = ("" if self.done else self._buffer), ""
        self.done = True
        return rest

    def cut(self, text: str) -> str:
        """A whole answer, cut."""
        return self.feed(text) + self.finish()

    def _first(self, buffer: str) -> int | None:
        best: tuple[int, str] | None = None
        for pattern in self._patterns:
            at = buffer.find(pattern)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, pattern)
        if best is None:
            return None
        self.found = best[1]
        if best[1] in self.markers:
            self.flags.append(TEMPLATE_LEAK)
        if best[1] in self.stops:
            self.flags.append(STOP_ENFORCED)
        return best[0]

    def _held(self, buffer: str) -> int:
        """The length of the longest tail of `buffer` that begins some pattern."""
        for size in range(min(len(buffer), self._longest - 1), 0, -1):
            tail = buffer[-size:]
            if any(pattern.startswith(tail) for pattern in self._patterns):
                return size
        return 0

"""A backend's answer on its way out: every choice masked and cut, whole or streamed.

Each choice's text goes through its own filter: the backend's key masked
(masking.py), then cut at the first stop string or template marker
(policy.py). A request with `n > 1` gets one filter per choice index, so
interleaved choices (vLLM sends choice 0 and 1 turn about) are each cut
where they leak. Every other string of the answer (tool calls, an error
object) is masked whole.

A stream is read to its end — the backend's `[DONE]` — so the usage chunk a
client asked for with `stream_options.include_usage` (sent after the last
finish_reason, with no choices) reaches it and the ledger. The read stops
early only once every choice has ended and one was cut: the backend would
otherwise run on, generating what no one will see.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents.gateway.masking import StreamMask, mask_json
from agents.gateway.policy import Scanner

__all__ = ["ChoiceText", "StreamPolice", "police_whole"]


class ChoiceText:
    """One choice's text: masked, then cut."""

    def __init__(self, scanner: Scanner, secrets: tuple[str, ...]) -> None:
        self.scanner = scanner
        self.mask = StreamMask(secrets)

    def feed(self, text: str) -> str:
        return self.scanner.feed(self.mask.feed(text))

    def finish(self) -> str:
        return self.scanner.feed(self.mask.finish()) + self.scanner.finish()

    def whole(self, text: str) -> str:
        return self.feed(text) + self.finish()

    @property
    def cut(self) -> bool:
        return self.scanner.found is not None


def _index(choice: dict[str, Any]) -> int:
    index = choice.get("index", 0)
    return index if isinstance(index, int) and not isinstance(index, bool) else 0


def police_whole(
    answer: dict[str, Any], make: Callable[[], Scanner], secrets: tuple[str, ...]
) -> tuple[dict[str, Any], list[str], list[str]]:
    """A whole (non-streamed) answer masked and cut: (answer, texts, flags)."""
    answer = mask_json(answer, secrets)
    texts: list[str] = []
    flags: list[str] = []
    for choice in answer.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str) and isinstance(message, dict):
            text = ChoiceText(make(), secrets)
            message["content"] = text.whole(content)
            texts.append(message["content"])
            if text.cut:
                choice["finish_reason"] = "stop"
                flags += text.scanner.flags
    return answer, texts, flags


class StreamPolice:
    """The chunks of one streamed answer, each masked and its choices cut."""

    def __init__(self, make: Callable[[], Scanner], secrets: tuple[str, ...], n: int) -> None:
        self.make, self.secrets, self.n = make, secrets, n
        self.choices: dict[int, ChoiceText] = {}
        self.ended: set[int] = set()
        self.texts: list[str] = []

    @property
    def flags(self) -> list[str]:
        return [flag for text in self.choices.values() for flag in text.scanner.flags]

    @property
    def found(self) -> bool:
        return any(text.cut for text in self.choices.values())

    @property
    def done(self) -> bool:
        """Every choice has ended and one was cut: reading on would only let the model run."""
        return self.found and len(self.ended) >= self.n

    def chunk(self, chunk: dict[str, Any]) -> dict[str, Any] | None:
        """The chunk to pass on, or None when nothing is left in it."""
        chunk = mask_json(chunk, self.secrets)
        choices = chunk.get("choices")
        if choices is not None and not isinstance(choices, list):
            return None  # not the OpenAI shape: nothing the scanners could read is passed on
        if not choices:
            return chunk  # a usage chunk, an error object: masked, passed on
        kept = []
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            index = _index(choice)
            if index in self.ended:
                continue  # cut earlier: what follows is what the cut removed
            text = self.choices.setdefault(index, ChoiceText(self.make(), self.secrets))
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = choice["delta"] = {}
            if isinstance(delta.get("content"), str):
                delta["content"] = text.feed(delta["content"])
            if not text.cut and choice.get("finish_reason"):
                delta["content"] = (delta.get("content") or "") + text.finish()
                self.ended.add(index)
            if text.cut:
                choice["finish_reason"] = "stop"
                self.ended.add(index)
            if isinstance(delta.get("content"), str):
                self.texts.append(delta["content"])
            kept.append(choice)
        if not kept and "usage" not in chunk:
            return None
        chunk["choices"] = kept
        return chunk

    def rest(self) -> list[tuple[int, str]]:
        """What is still held back of each choice that never ended, once the stream has."""
        out = []
        for index, text in sorted(self.choices.items()):
            if index in self.ended:
                continue
            held = text.finish()
            self.ended.add(index)
            if held:
                self.texts.append(held)
                out.append((index, held))
        return out

"""A model name to the backend that serves it: the longest matching prefix wins.

`qwen2.5-coder` goes to the backend with prefix `qwen2.5-` rather than the
one with `qwen`, whatever order the tables are written in. A backend with
`strip_prefix` is sent the name without its prefix (`cloud/gpt-x` → `gpt-x`).
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.gateway.config import BackendConfig
from room.errors import BullpenError

__all__ = ["Route", "Router", "UnknownModel"]


class UnknownModel(BullpenError):
    """No backend serves this model name (404)."""

    code = "unknown_model"
    status = 404


@dataclass(frozen=True)
class Route:
    backend: str
    config: BackendConfig
    model: str  # the name the backend is sent


class Router:
    def __init__(self, backends: dict[str, BackendConfig]) -> None:
        self.backends = dict(backends)
        pairs = [(p, name) for name, b in backends.items() for p in b.prefixes]
        self._by_length = sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)

    def prefixes(self) -> list[str]:
        return sorted(prefix for prefix, _ in self._by_length)

    def route(self, model: object) -> Route:
        if not isinstance(model, str) or not model:
            raise UnknownModel(
                'the request names no model; set "model" to a name starting with one of '
                + ", ".join(self.prefixes()),
                prefixes=self.prefixes(),
            )
        for prefix, name in self._by_length:
            if model.startswith(prefix):
                config = self.backends[name]
                upstream = model[len(prefix) :] if config.strip_prefix else model
                return Route(name, config, upstream or model)
        raise UnknownModel(
            f"no backend serves the model {model[:200]!r}; the known prefixes are "
            + ", ".join(self.prefixes()),
            prefixes=self.prefixes(),
        )

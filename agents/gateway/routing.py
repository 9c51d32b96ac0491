"""A model name to the backend that serves it: a listed id first, else the longest prefix.

An id a backend listed in `/v1/models` goes to that backend as it is, even
when no prefix matches it: llama-server names its model by its file path
(`models/x.gguf`), vLLM by `Org/Name`, and a client that picks an id from
the gateway's list must be able to use it. The operator's prefixes come
first: an id that another backend's prefix claims is not listed for the
backend that named it; when two backends list the same id, the first by
name lists and serves it. Otherwise `qwen2.5-coder` goes to the
backend with prefix `qwen2.5-` rather than the one with `qwen`, whatever
order the tables are written in. A backend with `strip_prefix` is sent the
name without its prefix (`cloud/gpt-x` → `gpt-x`). Both matches are exact
and case-sensitive: `Qwen` is not `qwen`.
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
        self._lists: dict[str, dict[str, str]] = {}  # backend → {listed id: name sent}
        self._listed: dict[str, Route] = {}

    def learn(self, lists: dict[str, dict[str, str]]) -> dict[str, list[str]]:
        """What the backends listed at /v1/models ({backend: {id as the gateway lists it: name
        it is sent}}; a backend left out keeps what it listed before). Returns the ids each
        backend is listed with: an id another backend's prefix claims, or one a backend
        earlier by name listed too, stays with that other backend."""
        self._lists.update({name: dict(found) for name, found in lists.items()})
        routes: dict[str, Route] = {}
        kept: dict[str, list[str]] = {}
        for name in sorted(self._lists):
            kept[name] = []
            for model, upstream in self._lists[name].items():
                owner = self._by_prefix(model)
                if model in routes or (owner is not None and owner.backend != name):
                    continue
                routes[model] = Route(name, self.backends[name], upstream)
                kept[name].append(model)
        self._listed = routes
        return kept

    def knows(self, model: object) -> bool:
        """Whether `model` routes without asking the backends for their lists."""
        if not isinstance(model, str) or not model:
            return False
        return model in self._listed or any(model.startswith(p) for p, _ in self._by_length)

    def _by_prefix(self, model: str) -> Route | None:
        for prefix, name in self._by_length:
            if model.startswith(prefix):
                config = self.backends[name]
                upstream = model[len(prefix) :] if config.strip_prefix else model
                return Route(name, config, upstream or model)
        return None

    def prefixes(self) -> list[str]:
        return sorted(prefix for prefix, _ in self._by_length)

    def route(self, model: object) -> Route:
        if not isinstance(model, str) or not model:
            raise UnknownModel(
                'the request names no model; set "model" to a name starting with one of '
                + ", ".join(self.prefixes()),
                prefixes=self.prefixes(),
            )
        found = self._listed.get(model) or self._by_prefix(model)
        if found is not None:
            return found
        raise UnknownModel(
            f"no backend serves the model {model[:200]!r}; the known prefixes are "
            + ", ".join(self.prefixes())
            + " (case-sensitive), and GET /v1/models lists the ids the backends serve",
            prefixes=self.prefixes(),
        )

"""`GET /v1/models`: every backend's models, and each listed id made routable.

A backend that does not answer its own /models is left out of the list (a
bare prefix such as `dead-` is no model a client can pick); it is asked
again at the next refresh, and a request by prefix is still routed to it.

What a backend lists is what a client will ask for, so the ids learnt here
go to the router (routing.py: a listed id goes to the backend that listed
it). A request for a model the router does not know asks the backends for
their lists again, at most once every REFRESH_S, so a client that picked an
id before a restart of the gateway is still served, and a stream of unknown
names (or of /v1/models requests) cannot turn into a stream of calls to the
backends.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from agents.gateway.config import GatewayConfig
from agents.gateway.routing import Route, Router
from agents.gateway.upstream import backend_key
from room.errors import BullpenError

__all__ = ["Catalog"]

REFRESH_S = 10.0
LIST_TIMEOUT_S = 5.0
MAX_LISTED = 1000  # ids taken from one backend's list


class Catalog:
    def __init__(self, config: GatewayConfig, router: Router, client: httpx.AsyncClient) -> None:
        self.config, self.router, self.client = config, router, client
        self._lock = asyncio.Lock()
        self._fetched = -REFRESH_S
        self._models: list[dict[str, Any]] | None = None

    async def _ask(self, name: str) -> dict[str, str] | None:
        """One backend's models ({id as listed here: name sent}); None when it did not answer."""
        config = self.config.backends[name]
        headers = {}
        try:
            key = backend_key(Route(name, config, ""))
            if key:
                headers["Authorization"] = f"Bearer {key}"
            answer = await self.client.get(
                config.base_url + "/models", headers=headers, timeout=LIST_TIMEOUT_S
            )
            data = answer.json().get("data", []) if answer.is_success else None
        except (BullpenError, httpx.HTTPError, ValueError, AttributeError, RecursionError):
            return None
        learnt: dict[str, str] = {}
        for item in data[:MAX_LISTED] if isinstance(data, list) else []:
            model = item.get("id") if isinstance(item, dict) else None
            if not isinstance(model, str) or not model or len(model) > 512:
                continue
            shown = config.prefixes[0] + model if config.strip_prefix else model
            learnt[shown] = model
        return learnt if isinstance(data, list) else None

    async def _fetch(self) -> list[dict[str, Any]]:
        names = sorted(self.config.backends)
        answers = await asyncio.gather(*(self._ask(name) for name in names))
        kept = self.router.learn(
            {name: found for name, found in zip(names, answers, strict=True) if found is not None}
        )
        self._fetched = time.monotonic()
        models = []
        for name, found in zip(names, answers, strict=True):
            if found is None:  # it did not answer: a bare prefix is no model anyone can use
                continue
            ids = kept.get(name, [])
            if not ids:  # what it serves, by prefix, when it lists nothing of its own
                ids = list(self.config.backends[name].prefixes)
            models += [{"id": m, "object": "model", "owned_by": name} for m in ids]
        return models

    async def models(self) -> list[dict[str, Any]]:
        """Every backend's list, in the order of their names; the router learns them. Asked
        again at most every REFRESH_S, so a caller polling /v1/models cannot turn into a
        flood of calls to the backends."""
        async with self._lock:
            if self._stale() or self._models is None:
                self._models = await self._fetch()
            return self._models

    def _stale(self) -> bool:
        return time.monotonic() - self._fetched >= REFRESH_S

    async def route(self, model: object) -> Route:
        """The route for `model`, asking the backends for their lists when it is not known."""
        if isinstance(model, str) and model and not self.router.knows(model) and self._stale():
            async with self._lock:
                if self._stale():
                    self._models = await self._fetch()
        return self.router.route(model)

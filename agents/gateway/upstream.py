"""One call to a backend: connect errors and 5xx retried with backoff, within the deadline.

The response is opened as a stream either way, so a streamed answer is
passed on as it comes; nothing has been passed on while a retry is still
possible. When the retries or the deadline run out the caller gets a 502
that names the backend and what went wrong — never the backend's key,
which is masked out of anything quoted.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Any

import httptools

from agents.gateway.http1 import Pool, UpstreamResponse
from agents.gateway.masking import mask_text
from agents.gateway.routing import Route
from room.errors import BullpenError, ConfigError
from room.logs import register_secret

__all__ = ["NO_RETRY", "BackendFailed", "backend_key", "open_call"]

EXCERPT = 200
# The gateway has retried already, within the request's deadline: an OpenAI client's own
# retries (the SDKs make 2 by default) would only multiply the calls to a failing backend.
NO_RETRY = {"x-should-retry": "false"}


class BackendFailed(BullpenError):
    """The backend could not answer within the request's deadline (502)."""

    code = "backend_failed"
    status = 502
    headers = NO_RETRY


def backend_key(route: Route) -> str | None:
    """The backend's key from the environment variable its table names, scrubbed from logs."""
    variable = route.config.api_key_env
    if variable is None:
        return None
    key = os.environ.get(variable, "").strip()
    if not key:
        raise ConfigError(
            f"[gateway.backends.{route.backend}] api_key_env names {variable}, but it is not "
            "set in the gateway's environment; export it (or put it in the unit's "
            "EnvironmentFile) and restart the gateway"
        )
    register_secret(key)
    return key


def _mask(text: str, key: str | None) -> str:
    flat = " ".join(mask_text(text, (key,) if key else ()).split())
    return flat if len(flat) <= EXCERPT else flat[:EXCERPT] + "…"


async def open_call(
    pool: Pool,
    route: Route,
    body: dict[str, Any],
    *,
    deadline: float,
    retries: int,
    backoff_s: float,
    tried: Callable[[], None] | None = None,
) -> UpstreamResponse:
    """The backend's open response (status < 500), or BackendFailed. Close it when done.
    `tried` is called before each attempt (the ledger counts them)."""
    key = backend_key(route)
    headers = {"Accept": "application/json, text/event-stream"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    url = route.config.base_url + "/chat/completions"
    payload = json.dumps(body, ensure_ascii=False).encode()
    attempt, problem = 0, "no attempt was made"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        if tried is not None:
            tried()
        try:
            response = await asyncio.wait_for(pool.post(url, payload, headers), left)
        except TimeoutError:
            problem = "no answer before the request's deadline"
            break
        except OSError as exc:
            problem = (
                f"cannot connect ({_mask(exc.strerror or str(exc), key) or type(exc).__name__})"
            )
        except httptools.HttpParserError as exc:
            problem = f"not an HTTP answer ({_mask(str(exc), key)})"
        else:
            if response.status_code < 500:
                return response
            text = (await response.read()).decode("utf-8", "replace")
            problem = f"HTTP {response.status_code}: {_mask(text, key) or '(empty body)'}"
        if attempt >= retries:
            break
        attempt += 1
        pause = backoff_s * 2 ** (attempt - 1)
        if time.monotonic() + pause >= deadline:
            break
        await asyncio.sleep(pause)
    raise BackendFailed(
        f"the backend {route.backend} failed after {attempt + 1} attempt(s): {problem}; "
        f"check the model server behind [gateway.backends.{route.backend}]",
        backend=route.backend,
    )

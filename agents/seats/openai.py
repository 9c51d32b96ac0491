"""The openai seat: any OpenAI-compatible `POST {base_url}/chat/completions`.

llama.cpp's server, vLLM, Ollama and LiteLLM all speak it. One user message
carries the whole prompt (prompts are self-contained by contract). The key,
when there is one, is read from the environment variable the table names at
call time, registered with the log scrubber, and never put in an error:
server bodies quoted in errors have it masked too, in case one echoes it.

A seat with `via = "gateway"` sends its calls to the model gateway instead
(docs/gateway.md), with the nick's caller token from its 0600 file as the
bearer; the lurker says where both are. When the gateway refuses the call
for a budget (429), the failure is final: no retry, no fallback seat, and
never a direct call around the gateway.

`json_mode = "auto"` asks for `response_format = {"type": "json_object"}`;
a server that answers 400 (or 422) mentioning response_format is asked once
more without it, and the seat remembers not to send it again.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import httpx
import structlog

from agents.seats.base import Seat
from agents.seats.request import JudgmentRequest
from room.errors import SeatError, SecretFileError
from room.logs import register_secret
from trust.secretfiles import read_secret_text

if TYPE_CHECKING:
    from agents.seats.tables import GatewayAccess, OpenAISeatConfig

log = structlog.get_logger("agents.seats")

EXCERPT = 300  # characters of a server's body quoted in an error


def redact_url(url: str) -> str:
    """The URL without user:password@, which may hold a credential."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


class OpenAISeat(Seat):
    kind: ClassVar[str] = "openai"

    def __init__(
        self, name: str, config: OpenAISeatConfig, gateway: GatewayAccess | None = None
    ) -> None:
        super().__init__(name, fallback=config.fallback)
        self.config = config
        self.gateway = gateway if config.via == "gateway" else None
        base = self.gateway.url if self.gateway else (config.base_url or "")
        self.url = base.rstrip("/") + "/chat/completions"
        self.shown_url = redact_url(self.url)
        # None: not yet known; False: the server refused response_format once.
        self.json_mode_works: bool | None = None

    def _key(self) -> str | None:
        if self.config.via == "gateway":
            return self._caller_token()
        variable = self.config.api_key_env
        if variable is None:
            return None
        key = os.environ.get(variable, "").strip()
        if not key:
            raise self.fail(
                f"[seats.{self.name}] api_key_env names {variable}, but {variable} is not set "
                f"in this process's environment; export it (or put it in the unit's "
                f"EnvironmentFile) or remove api_key_env if the server needs no key"
            )
        register_secret(key)
        return key

    def _caller_token(self) -> str:
        if self.gateway is None:
            raise self.fail(
                f'[seats.{self.name}] says via = "gateway", but this home configures no '
                "[gateway] section; add one (`bullpen docs gateway`) or give the seat a base_url"
            )
        try:
            token = read_secret_text(self.gateway.token_file, "gateway token file").decode()
        except SecretFileError as exc:
            raise self.fail(
                f"{exc.message} — issue this nick's caller token with `bullpen gateway token NICK`"
            ) from None
        register_secret(token)
        return token

    def _body(self, request: JudgmentRequest, json_mode: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": "user", "content": request.prompt}],
            "stream": False,
        }
        if self.config.stop:
            body["stop"] = list(self.config.stop)
        if self.config.temperature is not None:
            body["temperature"] = self.config.temperature
        if self.config.max_tokens is not None:
            body["max_tokens"] = self.config.max_tokens
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def _wants_json_mode(self) -> bool:
        mode = self.config.json_mode
        return mode is True or (mode == "auto" and self.json_mode_works is not False)

    async def complete(self, request: JudgmentRequest) -> str:
        key = self._key()
        headers = {"Accept": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        json_mode = self._wants_json_mode()
        timeout_s = self.config.timeout_s
        # httpx defaults to a 5 s read timeout; a model may think for minutes.
        timeout = httpx.Timeout(timeout_s)
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout_s), httpx.AsyncClient(timeout=timeout) as client:
                response = await self._post(client, request, headers, json_mode, key)
                if (
                    json_mode
                    and self.config.json_mode == "auto"
                    and response.status_code in (400, 422)
                    and "response_format" in response.text.lower()
                ):
                    self.json_mode_works = False
                    log.info(
                        "seat.json_mode_unsupported",
                        seat=self.name,
                        url=self.shown_url,
                        status=response.status_code,
                    )
                    response = await self._post(client, request, headers, False, key)
                elif json_mode and response.is_success:
                    self.json_mode_works = True
        except (TimeoutError, httpx.TimeoutException):
            raise self.fail(
                f"no answer from {self.shown_url} within {timeout_s:g} s; the model may be "
                f"overloaded or too slow — raise [seats.{self.name}] timeout_s or check the server"
            ) from None
        except httpx.ConnectError as exc:
            raise self.fail(
                f"cannot connect to {self.shown_url} ({_mask(str(exc), key) or 'refused'}); "
                f"is the model server running? check [seats.{self.name}] base_url"
            ) from None
        except httpx.HTTPError as exc:
            raise self.fail(
                f"the request to {self.shown_url} failed: {type(exc).__name__}: "
                f"{_mask(str(exc), key)}"
            ) from None
        log.debug(
            "seat.http",
            seat=self.name,
            url=self.shown_url,
            status=response.status_code,
            elapsed_ms=round((time.monotonic() - started) * 1000),
        )
        return self._content(response, key)

    async def _post(
        self,
        client: httpx.AsyncClient,
        request: JudgmentRequest,
        headers: dict[str, str],
        json_mode: bool,
        key: str | None,
    ) -> httpx.Response:
        response = await client.post(self.url, json=self._body(request, json_mode), headers=headers)
        if response.is_success or response.status_code in (400, 422):
            return response
        raise self._http_error(response, key)

    def _http_error(self, response: httpx.Response, key: str | None) -> SeatError:
        status = response.status_code
        if self.gateway is not None and status in (401, 429):
            hint = (
                "the gateway's budget for this call is spent (the error names it and when it "
                "resets); not retried, no fallback, no direct call"
                if status == 429
                else "the gateway does not know this nick's token: issue it with "
                "`bullpen gateway token NICK` and restart the gateway"
            )
            reason = f"the gateway refused the call (HTTP {status}): {_excerpt(response.text, key)} — {hint}"
            return SeatError(
                f"{self}: {reason}", seat=self.name, kind=self.kind, reason=reason, final=True
            )
        hint = {
            401: f"check the key in ${self.config.api_key_env}"
            if self.config.api_key_env
            else f"the server wants a key: set [seats.{self.name}] api_key_env",
            403: "the key is not allowed to use this model",
            404: f"check [seats.{self.name}] base_url (usually ends in /v1) and model",
        }.get(status, "check the model server's log")
        return self.fail(
            f"{self.shown_url} answered HTTP {status}: {_excerpt(response.text, key)} — {hint}"
        )

    def _content(self, response: httpx.Response, key: str | None) -> str:
        if not response.is_success:
            refused_json = "response_format" in response.text.lower()
            if self.config.json_mode is True and refused_json:
                raise self.fail(
                    f"{self.shown_url} refused response_format (HTTP {response.status_code}: "
                    f"{_excerpt(response.text, key)}); set [seats.{self.name}] json_mode = "
                    '"auto" or false'
                )
            raise self._http_error(response, key)
        try:
            body = response.json()
        except ValueError:
            raise self.fail(
                f"{self.shown_url} answered HTTP {response.status_code} but the body is not "
                f"JSON: {_excerpt(response.text, key)} — is base_url an OpenAI-compatible "
                "endpoint (usually ending in /v1)?"
            ) from None
        try:
            content = body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise self.fail(
                f"{self.shown_url} answered, but not in the chat-completions shape "
                f"(no choices[0].message.content): {_excerpt(response.text, key)}"
            )
        return content


def _mask(text: str, key: str | None) -> str:
    return text.replace(key, "***") if key else text


def _excerpt(text: str, key: str | None) -> str:
    flat = " ".join(_mask(text, key).split())
    if not flat:
        return "(empty body)"
    return repr(flat if len(flat) <= EXCERPT else flat[:EXCERPT] + "…")

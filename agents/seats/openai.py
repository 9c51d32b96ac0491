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

The step's schema is sent as `response_format = {"type": "json_schema",
...,"strict": true}`, which OpenAI, vLLM, Ollama and llama.cpp (as a grammar)
all accept, so even a weak model answers in shape. With `json_mode =
"auto"` a server that refuses it (HTTP 400 or 422) is asked once more with
`{"type": "json_object"}`, then once with the prompt alone; `json_mode =
true` never drops to the prompt alone, `false` sends no response_format.
What worked is remembered per server and model for the life of the process
(STRUCTURED_MEMORY): the lurker is long-lived, so a refusing server costs one
extra request per restart, and nothing goes stale when the server is
upgraded. A step-down is remembered only once the lower mode answered, so a
400 for another cause (a prompt over the context) does not demote the
server. The reply's data says which mode answered ("structured").

A step's `max_tokens` (what its answer can need) is sent, lowered to the
table's `max_tokens` when that is smaller. A request that asks for text
(`structured = False`: a code block) is sent no response_format; one that
names its own temperature or seed (a later attempt sampling another answer)
is sent those over the table's, and its stop strings beside the table's.
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import structlog

from agents.seats.base import Completion, Seat
from agents.seats.request import JudgmentRequest
from room.errors import SeatError, SecretFileError
from room.httpverify import verify_tls
from room.logs import register_secret
from trust.secretfiles import read_secret_text

if TYPE_CHECKING:
    import httpx

    from agents.seats.tables import GatewayAccess, OpenAISeatConfig

log = structlog.get_logger("agents.seats")

EXCERPT = 300  # characters of a server's body quoted in an error
JSON_SCHEMA, JSON_OBJECT, PROMPT = "json_schema", "json_object", "prompt"
LADDER = (JSON_SCHEMA, JSON_OBJECT, PROMPT)  # strongest first
REFUSED = (400, 422)  # what a server answers to a response_format it does not take
# ... and what its body then mentions: a 400 for anything else (a prompt over the context)
# is the seat's error, not a reason to step down.
_REFUSAL_WORDS = ("response_format", "json_schema", "json_object", "schema", "grammar")

# (chat-completions URL, model) -> the strongest mode that server answered; see the docstring.
STRUCTURED_MEMORY: dict[tuple[str, str], str] = {}


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
        # `slots`: at most that many requests of this seat in flight at once, per event loop
        # (a lurker's concurrent asks share one), so each call's timeout_s starts when the
        # server can begin it, not while it waits behind the others.
        self._gates: weakref.WeakKeyDictionary[Any, asyncio.Semaphore] = weakref.WeakKeyDictionary()

    @property
    def remembered(self) -> str | None:
        """The mode this server and model last answered with after a step-down, if any."""
        return STRUCTURED_MEMORY.get((self.url, self.config.model))

    def ladder(self, request: JudgmentRequest) -> list[str]:
        """The modes to try for `request`, strongest first (see the module docstring)."""
        mode = self.config.json_mode
        if mode is False or not request.structured:
            return [PROMPT]
        modes = [m for m in LADDER if m != JSON_SCHEMA or request.answer_schema is not None]
        if mode is True:
            modes.remove(PROMPT)
        known = self.remembered
        if known in modes:
            modes = modes[modes.index(known) :]
        return modes

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

    def _body(self, request: JudgmentRequest, mode: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": "user", "content": request.prompt}],
            "stream": False,
        }
        stops = [*self.config.stop, *(s for s in request.stop if s not in self.config.stop)]
        if stops:
            body["stop"] = stops
        temperature = request.temperature
        if temperature is None:
            temperature = self.config.temperature
        if temperature is not None:
            body["temperature"] = temperature
        if request.seed is not None:
            body["seed"] = request.seed
        for penalty in ("frequency_penalty", "presence_penalty"):
            if getattr(self.config, penalty) is not None:
                body[penalty] = getattr(self.config, penalty)
        bound = self._max_tokens(request)
        if bound is not None:
            body["max_tokens"] = bound
        if mode == JSON_SCHEMA and request.answer_schema is not None:
            body["response_format"] = {
                "type": JSON_SCHEMA,
                "json_schema": {
                    "name": request.answer_schema.name,
                    "schema": request.answer_schema.schema,
                    "strict": True,
                },
            }
        elif mode == JSON_OBJECT:
            body["response_format"] = {"type": JSON_OBJECT}
        return body

    def _max_tokens(self, request: JudgmentRequest) -> int | None:
        """The step's bound, lowered to the table's when that is smaller."""
        bounds = [b for b in (self.config.max_tokens, request.max_tokens) if b is not None]
        return min(bounds) if bounds else None

    async def complete(self, request: JudgmentRequest) -> str:
        return (await self.answer(request)).text

    async def answer(self, request: JudgmentRequest) -> Completion:
        if self.config.slots is None:
            return await self._answer(request)
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Semaphore(self.config.slots)
        async with gate:
            return await self._answer(request)

    async def _answer(self, request: JudgmentRequest) -> Completion:
        # httpx loads on the first call: a hub or a lurker validating society.toml builds
        # every seat table to check it, and should not pay for a client it never uses.
        import httpx

        key = self._key()
        headers = {"Accept": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        if self.gateway is not None:  # the run and the ask this call is for (seats/runcall.py)
            from agents.seats.runcall import headers as run_headers

            headers.update(run_headers())
            headers["x-bullpen-seat"] = self.name
        modes = self.ladder(request)
        mode = modes[0]
        timeout_s = self.config.timeout_s
        # httpx defaults to a 5 s read timeout; a model may think for minutes.
        timeout = httpx.Timeout(timeout_s)
        started = time.monotonic()
        sent = 0  # requests that reached the server (a refused format is asked again)
        response: httpx.Response | None = None
        outcome = "cancelled"  # until the call ends one way or another
        try:
            try:
                async with (
                    asyncio.timeout(timeout_s),
                    httpx.AsyncClient(timeout=timeout, verify=verify_tls(self.url)) as client,
                ):
                    for mode in modes:
                        sent += 1
                        response = await self._post(client, request, headers, mode, key)
                        if mode == modes[-1] or not _refused_format(response):
                            break
                        log.info(
                            "seat.structured_refused",
                            seat=self.name,
                            url=self.shown_url,
                            mode=mode,
                            status=response.status_code,
                        )
                    if response is not None and response.is_success and mode != modes[0]:
                        STRUCTURED_MEMORY[(self.url, self.config.model)] = mode
            except (TimeoutError, httpx.TimeoutException):
                outcome = "timeout"
                raise self.fail(
                    f"no answer from {self.shown_url} within {timeout_s:g} s; the model may be "
                    f"overloaded or too slow — raise [seats.{self.name}] timeout_s or check the "
                    "server"
                ) from None
            except httpx.ConnectError as exc:
                outcome, sent = "unreachable", 0
                raise self.fail(
                    f"cannot connect to {self.shown_url} ({_mask(str(exc), key) or 'refused'}); "
                    f"is the model server running? check [seats.{self.name}] base_url"
                ) from None
            except httpx.HTTPError as exc:
                outcome = "error"
                raise self.fail(
                    f"the request to {self.shown_url} failed: {type(exc).__name__}: "
                    f"{_mask(str(exc), key)}"
                ) from None
            except SeatError:  # the server's HTTP error, explained by _post
                outcome = "error"
                raise
            outcome = "answered"
        finally:
            # Info, not debug: what each call asked of the server (never the prompt or the
            # answer), one line however it ended, so every request a server saw is counted.
            log.info(
                "seat.http",
                seat=self.name,
                step=request.step,
                url=self.shown_url,
                status=response.status_code if outcome == "answered" and response else outcome,
                structured=mode,
                max_tokens=self._max_tokens(request),
                elapsed_ms=round((time.monotonic() - started) * 1000),
                requests=sent,
                **_loosened(request, mode),
                **(_usage(response) if outcome == "answered" and response else {}),
            )
        if response is None:  # no mode to ask in: the ladder is never empty, but say so
            raise self.fail("no request was sent: the seat has no structured-output mode to try")
        text, finish = self._content(response, key)
        counted = _usage(response)
        tokens = sum(counted.values()) if counted else None
        return Completion(text, mode, cut_off=finish == "length", tokens=tokens)

    async def _post(
        self,
        client: httpx.AsyncClient,
        request: JudgmentRequest,
        headers: dict[str, str],
        mode: str,
        key: str | None,
    ) -> httpx.Response:
        response = await client.post(self.url, json=self._body(request, mode), headers=headers)
        if response.is_success or response.status_code in REFUSED:
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

    def _content(self, response: httpx.Response, key: str | None) -> tuple[str, str | None]:
        """The answer's text and the server's finish_reason ("length": cut at max_tokens)."""
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
            choice = body["choices"][0]
            content, finish = choice["message"]["content"], choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError):
            content, finish = None, None
        if not isinstance(content, str):
            raise self.fail(
                f"{self.shown_url} answered, but not in the chat-completions shape "
                f"(no choices[0].message.content): {_excerpt(response.text, key)}"
            )
        return content, finish if isinstance(finish, str) else None


def _usage(response: httpx.Response) -> dict[str, int]:
    """The server's own token counts for a call (`usage`), for the log; {} when it sent none:
    what `bullpen eval` sums as a seat's tokens (agents/evaluate/runners.py)."""
    try:
        usage = response.json().get("usage") if response.is_success else None
    except (ValueError, AttributeError):
        return {}
    if not isinstance(usage, dict):
        return {}
    counts = {"tokens_in": usage.get("prompt_tokens"), "tokens_out": usage.get("completion_tokens")}
    return {k: v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)}


def _loosened(request: JudgmentRequest, mode: str) -> dict[str, Any]:
    """The bounds the sent schema left to max_tokens, named in the request's log line."""
    schema = request.answer_schema
    if mode != JSON_SCHEMA or schema is None or not schema.loosened:
        return {}
    return {"schema_loosened": list(schema.loosened)}


def _refused_format(response: httpx.Response) -> bool:
    """Whether a response is a server refusing the response_format it was sent."""
    if response.status_code not in REFUSED:
        return False
    text = response.text.lower()
    return any(word in text for word in _REFUSAL_WORDS)


def _mask(text: str, key: str | None) -> str:
    return text.replace(key, "***") if key else text


def _excerpt(text: str, key: str | None) -> str:
    flat = " ".join(_mask(text, key).split())
    if not flat:
        return "(empty body)"
    return repr(flat if len(flat) <= EXCERPT else flat[:EXCERPT] + "…")

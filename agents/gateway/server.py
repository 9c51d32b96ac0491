"""The gateway's ASGI app: OpenAI-compatible, every call routed, policed, counted, written down.

    POST /v1/chat/completions   routed by model prefix; `stream: true` passed on as SSE
    GET  /v1/models             the union of the backends' models
    GET  /v1/budget?model=M     would a call for M be admitted now (counts nothing)
    GET  /health                liveness, the backends, and the flags counted so far

Every request but /health carries a caller token (401 without one). Every
failure is a JSON answer in the OpenAI shape, `{"error": {"type", "message",
...}}`, that never holds a token or a key. Routing by a dict lookup, as in
room/hub.py, keeps the gateway's own cost per call low.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httptools
import httpx
import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from agents.gateway.budgets import Budgets, Ticket
from agents.gateway.config import GatewayConfig
from agents.gateway.http1 import Pool, UpstreamResponse
from agents.gateway.ledger import Ledger, now_stamp
from agents.gateway.policy import Policy, Scanner
from agents.gateway.recording import Recorder, request_digest
from agents.gateway.routing import Route, Router
from agents.gateway.tokens import CallerTokens
from agents.gateway.upstream import backend_key, open_call
from room.errors import BullpenError

log = structlog.get_logger("agents.gateway")

MAX_BODY = 8 * 1024 * 1024
FLAGS_HEADER = "x-gateway-flags"

Endpoint = Callable[[Request], Awaitable[Response]]


class BadRequest(BullpenError):
    code = "bad_request"
    status = 400


def error_response(exc: BullpenError, status: int) -> JSONResponse:
    """The OpenAI error shape, with bullpen's details (budget, used, resets_at...) beside."""
    details = exc.to_dict()
    details.pop("error", None)
    return JSONResponse({"error": {"type": exc.code, "code": exc.code, **details}}, status)


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


class Call:
    """One chat completion in progress: what the ledger line will say."""

    def __init__(self, caller: str, model: str, route: Route, body: dict[str, Any]) -> None:
        self.started = time.monotonic()
        self.caller, self.model, self.route = caller, model, route
        self.prompt = _prompt_text(body)
        self.tokens_in: int | None = None
        self.tokens_out: int | None = None
        self.answer_chars: list[str] = []
        self.status = 200
        self.flags: list[str] = []

    def usage(self, usage: object) -> None:
        if isinstance(usage, dict):
            if isinstance(usage.get("prompt_tokens"), int):
                self.tokens_in = usage["prompt_tokens"]
            if isinstance(usage.get("completion_tokens"), int):
                self.tokens_out = usage["completion_tokens"]

    def entry(self) -> dict[str, Any]:
        estimated = self.tokens_in is None or self.tokens_out is None
        tokens_in = self.tokens_in if self.tokens_in is not None else estimate_tokens(self.prompt)
        answer = "".join(self.answer_chars)
        tokens_out = self.tokens_out if self.tokens_out is not None else estimate_tokens(answer)
        return {
            "ts": now_stamp(),
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

    @property
    def tokens(self) -> int:
        entry = self.entry()
        return int(entry["tokens_in"]) + int(entry["tokens_out"])


class Gateway:
    """What every request shares: the router, policies, tokens, budgets, ledger and client."""

    def __init__(
        self, config: GatewayConfig, tokens: CallerTokens, ledger: Ledger, budgets: Budgets
    ) -> None:
        self.config = config
        self.router = Router(config.backends)
        self.policies = {name: Policy.of(config.policy_for(name)) for name in config.backends}
        self.tokens = tokens
        self.ledger = ledger
        self.budgets = budgets
        self.recorder: Recorder | None = None  # set when [gateway] record = true
        self.counted: Counter[str] = Counter()
        self.pool = Pool()  # the hot path: chat completions
        self.client = httpx.AsyncClient(  # the rest: /v1/models
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
            timeout=httpx.Timeout(config.deadline_s),
        )
        self.routes: dict[str, tuple[str, Endpoint]] = {
            "/v1/chat/completions": ("POST", self.chat),
            "/v1/models": ("GET", self.models),
            "/v1/budget": ("GET", self.budget),
            "/health": ("GET", self.health),
        }

    async def aclose(self) -> None:
        await self.pool.aclose()
        await self.client.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        route = self.routes.get(scope["path"].rstrip("/") or "/")
        try:
            if route is None:
                raise NotFound(
                    f"no such endpoint {scope['path'][:100]!r}; see `bullpen docs gateway`"
                )
            if scope["method"] != route[0]:
                raise MethodNotAllowed(f"{scope['path']} takes {route[0]}")
            response = await route[1](request)
        except BullpenError as exc:
            response = error_response(exc, getattr(exc, "status", 400))
        except Exception:  # every failure is a JSON answer
            log.exception("unexpected error serving a request", path=scope["path"])
            response = error_response(
                BullpenError("the gateway hit an unexpected error; see its log"), 500
            )
        await response(scope, receive, send)

    # -- endpoints ----------------------------------------------------------

    async def health(self, request: Request) -> Response:
        failed = self.ledger.failed
        return JSONResponse(
            {
                "ok": failed is None,
                "service": "bullpen-gateway",
                "backends": sorted(self.config.backends),
                "callers": len(self.tokens),
                "counted": dict(self.counted),
                **({"problem": failed.message} if failed else {}),
            },
            status_code=200 if failed is None else 503,
        )

    async def budget(self, request: Request) -> Response:
        """The budget hook (seed 004): ask before an expensive call; 200 with room, else 429."""
        caller = self.tokens.caller(request.headers.get("authorization"))
        route = self.router.route(request.query_params.get("model"))
        refusal = self.budgets.refusal(caller, route.backend)
        if refusal is not None:
            return error_response(refusal, 429)
        return JSONResponse({"ok": True, "caller": caller, "backend": route.backend})

    async def models(self, request: Request) -> Response:
        self.tokens.caller(request.headers.get("authorization"))

        async def listed(name: str) -> list[dict[str, Any]]:
            config = self.config.backends[name]
            route = Route(name, config, "")
            headers = {}
            try:
                key = backend_key(route)
                if key:
                    headers["Authorization"] = f"Bearer {key}"
                answer = await self.client.get(
                    config.base_url + "/models", headers=headers, timeout=5.0
                )
                data = answer.json().get("data", []) if answer.is_success else []
            except (BullpenError, httpx.HTTPError, ValueError, AttributeError):
                data = []
            found = []
            for item in data if isinstance(data, list) else []:
                model = item.get("id") if isinstance(item, dict) else None
                if not isinstance(model, str):
                    continue
                if config.strip_prefix:
                    model = config.prefixes[0] + model
                found.append({"id": model, "object": "model", "owned_by": name})
            if not found:  # what it serves, by prefix, when it cannot list them
                found = [{"id": p, "object": "model", "owned_by": name} for p in config.prefixes]
            return found

        lists = await asyncio.gather(*(listed(name) for name in sorted(self.config.backends)))
        return JSONResponse({"object": "list", "data": [m for found in lists for m in found]})

    async def chat(self, request: Request) -> Response:
        caller = self.tokens.caller(request.headers.get("authorization"))
        body = await _json_body(request)
        digest = request_digest(body) if self.recorder is not None else None  # as sent
        model = body.get("model")
        route = self.router.route(model)
        call = Call(caller, str(model), route, body)
        try:
            ticket = self.budgets.admit(caller, route.backend)
        except BullpenError as exc:
            call.status, call.tokens_in, call.tokens_out = 429, 0, 0
            call.flags.append("OVER_BUDGET")
            await self.ledger.record(call.entry())
            raise exc from None
        policy = self.policies[route.backend]
        stops = policy.apply(body)
        body["model"] = route.model
        scanner = policy.scanner(stops)
        deadline = time.monotonic() + min(self.config.deadline_s, route.config.timeout_s)
        try:
            upstream = await open_call(
                self.pool,
                route,
                body,
                deadline=deadline,
                retries=self.config.retries,
                backoff_s=self.config.backoff_s,
            )
        except BullpenError as exc:
            call.status = getattr(exc, "status", 502)
            await self._end(call, ticket)
            raise
        if body.get("stream") is True and upstream.status_code < 400:
            return StreamingResponse(
                self._stream(upstream, call, ticket, scanner),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )
        try:
            raw = await asyncio.wait_for(upstream.read(), max(0.001, deadline - time.monotonic()))
        except (TimeoutError, OSError, httptools.HttpParserError):
            await upstream.aclose()
            call.status = 502
            await self._end(call, ticket)
            raise BadGateway(
                f"the backend {route.backend} did not finish its answer before the deadline"
            ) from None
        finally:
            await upstream.aclose()
        call.status = upstream.status_code
        if upstream.status_code >= 400:
            await self._end(call, ticket)
            return Response(raw, status_code=upstream.status_code, media_type="application/json")
        answer = self._police(raw, call, scanner)
        await self._end(call, ticket)
        if digest is not None and self.recorder is not None:  # [gateway] record = true
            await asyncio.to_thread(self.recorder.save, digest, str(model), answer)
        headers = {FLAGS_HEADER: ",".join(call.flags)} if call.flags else None
        return JSONResponse(answer, headers=headers)

    # -- the answer ---------------------------------------------------------

    def _police(self, raw: bytes, call: Call, scanner: Scanner) -> dict[str, Any]:
        try:
            answer = json.loads(raw)
        except ValueError:
            raise BadGateway(
                f"the backend {call.route.backend} answered with a body that is not JSON"
            ) from None
        if not isinstance(answer, dict):
            raise BadGateway(f"the backend {call.route.backend} answered with a non-object")
        call.usage(answer.get("usage"))
        for choice in answer.get("choices") or []:
            message = choice.get("message") if isinstance(choice, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                cutter = Scanner(scanner.stops, scanner.markers)
                message["content"] = cutter.cut(content)
                call.answer_chars.append(message["content"])
                if cutter.found is not None:
                    choice["finish_reason"] = "stop"
                    call.flags += cutter.flags
        if call.flags:
            answer["gateway_flags"] = sorted(set(call.flags))
        return answer

    async def _stream(
        self, upstream: UpstreamResponse, call: Call, ticket: Ticket, scanner: Scanner
    ) -> AsyncIterator[bytes]:
        last: dict[str, Any] = {}
        try:
            async for line in upstream.lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    continue
                if not isinstance(chunk, dict):
                    continue
                call.usage(chunk.get("usage"))
                last = chunk
                for choice in chunk.get("choices") or []:
                    if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                        continue
                    delta = choice.get("delta")
                    content = delta.get("content") if isinstance(delta, dict) else None
                    if isinstance(content, str):
                        delta["content"] = scanner.feed(content)
                        if scanner.done:
                            choice["finish_reason"] = "stop"
                    if choice.get("finish_reason") and isinstance(delta, dict):
                        delta["content"] = (delta.get("content") or "") + scanner.finish()
                    if isinstance(delta, dict) and isinstance(delta.get("content"), str):
                        call.answer_chars.append(delta["content"])
                yield b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"
                if scanner.done:
                    break
            rest = scanner.finish()
            if rest:
                call.answer_chars.append(rest)
                yield _sse(_extra_chunk(last, {"content": rest}, None))
        except (OSError, httptools.HttpParserError, asyncio.CancelledError) as exc:
            call.status = 499 if isinstance(exc, asyncio.CancelledError) else 502
            raise
        finally:
            await upstream.aclose()
            call.flags += scanner.flags
            await self._end(call, ticket)
        if call.flags:
            extra = _extra_chunk(last, {}, "stop" if scanner.found else None)
            extra["gateway_flags"] = sorted(set(call.flags))
            yield _sse(extra)
        yield b"data: [DONE]\n\n"

    async def _end(self, call: Call, ticket: Ticket) -> None:
        """Count the call's tokens, write its ledger line (durably), count its flags."""
        self.budgets.release(ticket, call.tokens)
        for flag in set(call.flags):
            self.counted[flag] += 1
        entry = call.entry()
        if call.flags:
            log.warning("gateway.flagged", **{k: entry[k] for k in ("caller", "model", "flags")})
        await asyncio.shield(self.ledger.record(entry))


def _sse(chunk: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"


def _extra_chunk(last: dict[str, Any], delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": last.get("id", "gateway"),
        "object": "chat.completion.chunk",
        "created": last.get("created", int(time.time())),
        "model": last.get("model", ""),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


class NotFound(BullpenError):
    code = "not_found"
    status = 404


class MethodNotAllowed(BullpenError):
    code = "method_not_allowed"
    status = 405


class BadGateway(BullpenError):
    code = "backend_failed"
    status = 502


async def _json_body(request: Request) -> dict[str, Any]:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise BadRequest(f"the request body is over {MAX_BODY} bytes")
    raw = b""
    async for piece in request.stream():
        raw += piece
        if len(raw) > MAX_BODY:
            raise BadRequest(f"the request body is over {MAX_BODY} bytes")
    try:
        body = json.loads(raw)
    except ValueError:
        raise BadRequest(
            "the request body is not JSON; send a chat-completions object with model and messages"
        ) from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object with model and messages")
    return body

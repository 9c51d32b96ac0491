"""The gateway's ASGI app: OpenAI-compatible, every call routed, policed, counted, written down.

    POST /v1/chat/completions   routed by listed id or model prefix; `stream: true` as SSE
    GET  /v1/models             the union of the backends' models (each id routes)
    GET  /v1/budget?model=M     would a call for M be admitted now (counts nothing)
    GET  /health                liveness, the backends, and the flags counted so far

Every request but /health carries a caller token (401 without one). A
request's body is read strictly (body.py: every bad body is a 4xx) and
screened for the home's secrets (trust/screen.py: a prompt holding one is
refused, 400, and never sent). Every failure is a JSON answer in the OpenAI
shape, `{"error": {"type", "message", ...}}`, that never holds a token or
a key, with `x-should-retry: false` where a retry cannot help. What a
backend sends back is masked and cut (answer.py). Routing by a dict
lookup, as in room/hub.py, keeps the gateway's own cost per call low.
"""

from __future__ import annotations

import asyncio
import json
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

from agents.gateway.answer import StreamPolice, police_whole
from agents.gateway.body import read_body
from agents.gateway.budgets import (
    OVER_BUDGET,
    OVER_RESERVATION,
    SECRET_REFUSED,
    Budgets,
    Ticket,
)
from agents.gateway.call import Call, RunHeaders
from agents.gateway.catalog import Catalog
from agents.gateway.config import GatewayConfig
from agents.gateway.http1 import Pool, UpstreamResponse
from agents.gateway.ledger import Ledger
from agents.gateway.masking import mask_body
from agents.gateway.policy import Policy, Scanner
from agents.gateway.recording import RUN_HEADER, Recorder, RecordKey
from agents.gateway.reserve import asked_bound, choices, worst_case
from agents.gateway.routing import Router
from agents.gateway.screening import RequestScreen
from agents.gateway.tokens import CallerTokens
from agents.gateway.upstream import NO_RETRY, backend_key, open_call
from room import strictjson
from room.errors import BullpenError, SecretFound
from trust.screen import HomeSecrets

log = structlog.get_logger("agents.gateway")

FLAGS_HEADER = "x-gateway-flags"
DEADLINE = "DEADLINE"  # a stream cut at the request's deadline
# A backend's own hints on a 4xx it sent, passed on with it (its 429 may be worth a retry).
RETRY_HEADERS = frozenset({"retry-after", "retry-after-ms", "x-should-retry"})

Endpoint = Callable[[Request], Awaitable[Response]]


def error_response(exc: BullpenError, status: int) -> JSONResponse:
    """The OpenAI error shape, with bullpen's details (budget, used, resets_at...) beside,
    and the error's retry hints (`x-should-retry`, `retry-after`) as headers."""
    details = exc.to_dict()
    details.pop("error", None)
    headers = getattr(exc, "headers", None)
    return JSONResponse(
        {"error": {"type": exc.code, "code": exc.code, **details}}, status, headers=headers
    )


class Gateway:
    """What every request shares: the router, policies, tokens, budgets, ledger and client."""

    def __init__(
        self,
        config: GatewayConfig,
        tokens: CallerTokens,
        ledger: Ledger,
        budgets: Budgets,
        secrets: HomeSecrets,
    ) -> None:
        self.config = config
        self.router = Router(config.backends)
        self.policies = {name: Policy.of(config.policy_for(name)) for name in config.backends}
        self.tokens = tokens
        self.ledger = ledger
        self.budgets = budgets
        self.screen = RequestScreen(secrets)  # no request carries a home secret to a backend
        self.recorder: Recorder | None = None  # set when [gateway] record = true
        self.telemetry: Any = None  # a LiveExporter when [telemetry] is configured
        self.counted: Counter[str] = Counter()
        self.pool = Pool()  # the hot path: chat completions
        self.client = httpx.AsyncClient(  # the rest: /v1/models
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
            timeout=httpx.Timeout(config.deadline_s),
        )
        self.catalog = Catalog(config, self.router, self.client)
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
        route = await self.catalog.route(request.query_params.get("model"))
        run = RunHeaders(request.headers)
        if run.thread is not None:
            self.budgets.runs.ask(run.thread, run.budget)
        refusal = self.budgets.refusal(caller, route.backend, run.thread)
        if refusal is not None:
            return error_response(refusal, 429)
        return JSONResponse({"ok": True, "caller": caller, "backend": route.backend})

    async def models(self, request: Request) -> Response:
        self.tokens.caller(request.headers.get("authorization"))
        return JSONResponse({"object": "list", "data": await self.catalog.models()})

    async def chat(self, request: Request) -> Response:
        caller = self.tokens.caller(request.headers.get("authorization"))
        run = RunHeaders(request.headers)
        if run.thread is not None:  # a run's own budget (--budget) tightens [budgets]
            self.budgets.runs.ask(run.thread, run.budget)
        body = await read_body(request)
        record = (  # the key as sent: caller, run and digest (agents/gateway/recording.py)
            RecordKey.of(caller, request.headers.get(RUN_HEADER), body)
            if self.recorder is not None
            else None
        )
        model = body.get("model")
        route = await self.catalog.route(model)
        price = self.config.price(str(model))
        call = Call(caller, str(model), route, body, run, price)
        try:
            self.screen.check_json(body, "the request to the gateway")
        except SecretFound as exc:
            if self.screen.screen().find(call.model) is not None:
                call.model = "(withheld: it held a secret)"  # the ledger never holds one
            call.status, call.tokens_in, call.tokens_out = 400, 0, 0
            call.flags.append(SECRET_REFUSED)
            await self.ledger.record(call.entry())
            raise exc from None
        policy = self.policies[route.backend]
        stops = policy.apply(body)
        worst = worst_case(body, price, str(model))
        if asked_bound(body) is None:  # no bound of its own: the budgets' room is its bound
            room = self.budgets.room(caller, route.backend, run.thread, worst)
            if room is not None:  # with no room left, a bound of 1 makes its worst not fit
                body["max_tokens"] = max(1, min(room // choices(body), 2**31 - 1))
                worst = worst_case(body, price, str(model))
        try:
            ticket = self.budgets.admit(caller, route.backend, run.thread, worst)
        except BullpenError as exc:
            call.status, call.tokens_in, call.tokens_out = 429, 0, 0
            call.flags.append(OVER_BUDGET)
            await self.ledger.record(call.entry())
            raise exc from None
        body["model"] = route.model
        deadline = time.monotonic() + min(self.config.deadline_s, route.config.timeout_s)
        try:
            upstream = await open_call(
                self.pool,
                route,
                body,
                deadline=deadline,
                retries=self.config.retries,
                backoff_s=self.config.backoff_s,
                tried=call.tried,
            )
        except BullpenError as exc:
            call.status = getattr(exc, "status", 502)
            await self._end(call, ticket)
            raise
        key = backend_key(route)  # read once already by open_call: it is set
        secrets = (key,) if key else ()
        if body.get("stream") is True and upstream.status_code < 400:
            police = StreamPolice(lambda: policy.scanner(stops), secrets, body.get("n") or 1)
            options = body.get("stream_options")
            wants_usage = isinstance(options, dict) and options.get("include_usage") is True
            return StreamingResponse(
                self._stream(upstream, call, ticket, police, deadline, wants_usage),
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
                f"the backend {route.backend} did not finish its answer before the deadline",
                backend=route.backend,
            ) from None
        finally:
            await upstream.aclose()
        call.status = upstream.status_code
        if upstream.status_code >= 400:
            await self._end(call, ticket)
            return Response(
                mask_body(raw, secrets),
                status_code=upstream.status_code,
                media_type="application/json",
                headers={k: v for k, v in upstream.headers.items() if k in RETRY_HEADERS},
            )
        try:
            answer = self._police(raw, call, lambda: policy.scanner(stops), secrets)
        finally:
            await self._end(call, ticket)
        if record is not None and self.recorder is not None:  # [gateway] record = true
            recorded = json.loads(answer)  # the answer as the caller gets it: masked and cut
            await asyncio.to_thread(self.recorder.save, record, str(model), recorded)
        headers = {FLAGS_HEADER: ",".join(call.flags)} if call.flags else None
        return Response(answer, media_type="application/json", headers=headers)

    # -- the answer ---------------------------------------------------------

    def _police(
        self, raw: bytes, call: Call, make: Callable[[], Scanner], secrets: tuple[str, ...]
    ) -> bytes:
        """The backend's whole answer, masked and cut, as the bytes to send; BadGateway (502)
        for a body that is not a JSON object with a list of choices, or cannot be sent on
        (NaN, nesting too deep to walk)."""
        backend = call.route.backend
        try:
            answer = strictjson.loads(raw)  # at most 32 deep: every walk below is bounded
            if not isinstance(answer, dict) or not isinstance(answer.get("choices", []), list):
                raise ValueError("not a chat completion")
            call.usage(answer.get("usage"))
            call.finished(answer.get("choices"))
            answer, texts, flags = police_whole(answer, make, secrets)
            call.answer_chars += texts
            call.flags += flags
            if call.flags:
                answer["gateway_flags"] = sorted(set(call.flags))
            return json.dumps(
                answer, ensure_ascii=False, allow_nan=False, separators=(",", ":")
            ).encode()
        except ValueError:
            call.status = 502
            raise BadGateway(
                f"the backend {backend} answered with a body that is not a chat completion "
                "the gateway can pass on (not JSON, not an object with a list of choices, "
                "NaN, or nested too deep)",
                backend=backend,
            ) from None

    async def _stream(
        self,
        upstream: UpstreamResponse,
        call: Call,
        ticket: Ticket,
        police: StreamPolice,
        deadline: float,
        wants_usage: bool = False,
    ) -> AsyncIterator[bytes]:
        """The backend's stream passed on, policed; the usage chunk last when asked for: the
        backend's own, or (a stream cut, a backend sending none) what the gateway counted,
        marked `estimated`, before any error event, so an SDK's last chunk holds it."""
        last: dict[str, Any] = {}
        usage_chunk: dict[str, Any] | None = None
        problem: str | None = None
        try:
            async for line in upstream.lines(deadline):
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    chunk = strictjson.loads(data)
                except ValueError:  # not JSON, NaN, nested too deep: nothing to pass on
                    continue
                if not isinstance(chunk, dict):
                    continue
                call.usage(chunk.get("usage"))
                call.finished(chunk.get("choices"))
                out = police.chunk(chunk)
                if out is None:
                    continue
                last = out
                if not out.get("choices") and isinstance(out.get("usage"), dict):
                    usage_chunk = out  # sent last, after the flags, as OpenAI orders them
                else:
                    yield _sse(out)
                if police.done:
                    break
            for index, rest in police.rest():
                yield _sse(_extra_chunk(last, index, {"content": rest}, None))
        except TimeoutError:
            call.status = 504
            call.flags.append(DEADLINE)
            seconds = min(self.config.deadline_s, call.route.config.timeout_s)
            problem = (
                f"the backend {call.route.backend} was still streaming at the request's "
                f"deadline ({seconds:g} s: [gateway] deadline_s, or the backend's timeout_s); "
                "the answer was cut there"
            )
        except (OSError, httptools.HttpParserError):
            call.status = 502
            problem = f"the backend {call.route.backend} broke off its answer"
        except asyncio.CancelledError:
            call.status = 499
            raise
        finally:
            await upstream.aclose()
            call.answer_chars += police.texts
            call.flags += police.flags
            await self._end(call, ticket)
        if wants_usage and (usage_chunk is None or problem is not None):
            usage_chunk = call.usage_chunk(last)
            if call.flags:
                usage_chunk["gateway_flags"] = sorted(set(call.flags))
            yield _sse(usage_chunk)
            usage_chunk = None
        if problem is not None:
            code = "deadline" if call.status == 504 else "backend_failed"
            yield _sse({"error": {"type": code, "code": code, "message": problem}})
        elif call.flags:
            extra = _extra_chunk(last, 0, {}, None)
            extra["gateway_flags"] = sorted(set(call.flags))
            yield _sse(extra)
        if usage_chunk is not None:
            if call.flags:
                usage_chunk["gateway_flags"] = sorted(set(call.flags))
            yield _sse(usage_chunk)
        yield b"data: [DONE]\n\n"

    async def _end(self, call: Call, ticket: Ticket) -> None:
        """Charge the call to the budgets, write its ledger line (durably), count its flags."""
        if ticket.worst.completion and call.tokens > ticket.worst.tokens:
            call.flags.append(OVER_RESERVATION)  # the backend did not hold to max_tokens
        entry = call.entry()
        self.budgets.release(ticket, entry)
        for flag in set(call.flags):
            self.counted[flag] += 1
        if call.flags:
            log.warning("gateway.flagged", **{k: entry[k] for k in ("caller", "model", "flags")})
        await asyncio.shield(self.ledger.record(entry))
        if self.telemetry is not None and isinstance(entry.get("thread"), str):
            self._trace(entry, call.run)

    def _trace(self, entry: dict[str, Any], run: RunHeaders | None) -> None:
        """The call's span, exported live under the span its seat's `traceparent` names (the
        step's), else under its step (or its run, with no seq) in the thread's derived trace."""
        from agents.telemetry.tree import call_record
        from room.traceids import run_span_id, step_span_id

        thread = entry["thread"]
        seq = entry.get("seq")
        parent = step_span_id(thread, seq) if isinstance(seq, int) else run_span_id(thread)
        trace = None
        if run is not None and run.parent is not None:
            trace, parent = run.parent
        span = call_record(entry, thread, parent, trace=trace)
        if span is not None:
            self.telemetry.submit(span)


def _sse(chunk: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk, ensure_ascii=False, allow_nan=False).encode() + b"\n\n"


def _extra_chunk(
    last: dict[str, Any], index: int, delta: dict[str, Any], finish: str | None
) -> dict[str, Any]:
    return {
        "id": last.get("id", "gateway"),
        "object": "chat.completion.chunk",
        "created": last.get("created", int(time.time())),
        "model": last.get("model", ""),
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
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
    headers = NO_RETRY

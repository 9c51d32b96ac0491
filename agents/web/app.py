"""The web view's routes: pages, the live stream, and the one form that posts.

    GET  /login?n=&e=&t=     a one-time link from `bullpen web url`: sets the session
    POST /logout             ends it, server-side: the cookie is refused from then on (CSRF)
    GET  /room               the live log, filtered like `bullpen tail`
    GET  /runs               every pipeline run as a timeline
    GET  /gate/THREAD        an expedition's Dig Report, as a form
    POST /gate/THREAD        the operator's answer (CSRF), posted as `expedition confirm` does
    GET  /society            the nicks, their lurkers, trust, lessons, gateway usage
    GET  /events             server-sent events: the newest lines, then each new one
    GET  /api/lines          older lines, for scrolling back
    GET  /static/NAME        the page's script and style

Every route but /login refuses a request without a valid session (401,
nothing else said; a session is valid while the session file holds it); every POST refuses one without its CSRF token (403,
nothing posted). Pages carry a strict Content-Security-Policy: no inline
script runs, whatever a room line holds.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, MutableMapping
from importlib.resources import files
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agents.web import pages
from agents.web.auth import COOKIE, SESSION_TTL_S, Auth
from agents.web.cost import cost_view, near_limit
from agents.web.feed import Feed, LineFilter
from agents.web.gate import GateRefusal, answer
from agents.web.runs import build_run, build_runs
from agents.web.society import gateway_usage, members

if TYPE_CHECKING:
    from agents.home import Home

FIRST_LINES = 200  # what a page gets at first paint; older ones as it scrolls
MAX_FORM_BYTES = 64 * 1024
KEEPALIVE_S = 15.0
STATIC_TYPES = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}
# Served without a session: the login page, and the icon a browser asks for on every page
# (the login page's too), which would otherwise be a 401 in its console.
PUBLIC = frozenset({"/login", "/favicon.ico"})
HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-frame-options": "DENY",
}


class Guarded:
    """The session check in front of every route but /login, and the security headers."""

    def __init__(self, app: Starlette, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope)
        if scope["path"] not in PUBLIC:
            try:
                session = self.auth.session(request.cookies.get(COOKIE))
            except sqlite3.Error:
                await _with_headers(_store_down())(scope, receive, send)
                return
            if session is None:
                page = pages.message(
                    "Log in first",
                    "This page needs a session. Run `bullpen web url` and open the link it prints.",
                )
                await _with_headers(HTMLResponse(page, status_code=401))(scope, receive, send)
                return
            scope.setdefault("state", {})["session"] = session

        async def secured(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.encode(), v.encode()) for k, v in HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, secured)


def _with_headers(response: Response) -> Response:
    response.headers.update(HEADERS)
    return response


async def _form(request: Request) -> dict[str, list[str]]:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


class WebApp:
    """The routes, over one Feed and one home."""

    def __init__(self, home: Home, feed: Feed, auth: Auth) -> None:
        self.home = home
        self.feed = feed
        self.auth = auth
        self.stopping = asyncio.Event()
        routes = [
            Route("/login", self.login),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/", lambda _: RedirectResponse("/room", 303)),
            Route("/room", self.room),
            Route("/runs", self.runs),
            Route("/gate/{thread}", self.gate, methods=["GET", "POST"]),
            Route("/cancel/{thread}", self.cancel, methods=["POST"]),
            Route("/society", self.society),
            Route("/cost", self.cost),
            Route("/events", self.events),
            Route("/api/lines", self.lines),
            Route("/api/status", self.status),
            Route("/static/{name}", self.static),
            Route("/favicon.ico", self.favicon),
        ]
        self.asgi = Guarded(Starlette(routes=routes), auth)

    def _csrf(self, request: Request) -> str:
        return self.auth.csrf(request.scope["state"]["session"])

    def _csrf_ok(self, request: Request, form: dict[str, list[str]]) -> bool:
        given = (form.get("csrf") or [""])[0]
        return self.auth.csrf_ok(request.scope["state"]["session"], given)

    async def login(self, request: Request) -> Response:
        q = request.query_params
        try:
            cookie = self.auth.redeem(q.get("n", ""), q.get("e", ""), q.get("t", ""))
        except sqlite3.Error:
            return _with_headers(_store_down())
        if cookie is None:
            page = pages.message(
                "This login link does not work",
                "It was used already, it expired, or it is not this home's. Run `bullpen web "
                "url` for a new one.",
            )
            return _with_headers(HTMLResponse(page, status_code=403))
        response = RedirectResponse("/room", 303)
        response.set_cookie(
            COOKIE, cookie, max_age=int(SESSION_TTL_S), httponly=True, samesite="strict", path="/"
        )
        return response

    async def logout(self, request: Request) -> Response:
        if not self._csrf_ok(request, await _form(request)):
            return _forbidden()
        try:
            self.auth.end(request.scope["state"]["session"])
        except sqlite3.Error:
            return _with_headers(_store_down())
        response = HTMLResponse(pages.message("Logged out", "Run `bullpen web url` to log in."))
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def room(self, request: Request) -> Response:
        params = {k: request.query_params.get(k, "") for k in ("thread", "from", "to", "type")}
        lines: list[dict[str, Any]] = []
        if self.feed.caught_up.is_set():  # the newest lines in the HTML: shown before any script
            found = self.feed.newest(FIRST_LINES, LineFilter.of(request.query_params))
            lines = [json.loads(raw) for raw in found]
        return HTMLResponse(pages.room(params, self._csrf(request), lines))

    async def runs(self, request: Request) -> Response:
        found = build_runs(self.feed.threads, self.home.trust.trusted)
        return HTMLResponse(pages.runs(found, self._csrf(request)))

    async def society(self, request: Request) -> Response:
        found = members(self.home, self.feed)  # on the loop: it reads the feed's threads
        usage = await asyncio.to_thread(gateway_usage, self.home)
        near = await asyncio.to_thread(near_limit, self.home)
        return HTMLResponse(pages.society(found, usage, self._csrf(request), near))

    async def cost(self, request: Request) -> Response:
        """Calls, tokens and cost per run, seat, nick and day from the gateway ledger; with
        ?thread=T, one run's own."""
        thread = request.query_params.get("thread") or None
        view = await asyncio.to_thread(cost_view, self.home, thread)
        return HTMLResponse(pages.cost(view, self._csrf(request)))

    async def gate(self, request: Request) -> Response:
        thread = request.path_params["thread"]
        notice, status = "", 200
        if request.method == "POST":
            form = await _form(request)
            if not self._csrf_ok(request, form):
                return _forbidden()
            redirect = (form.get("redirect") or [""])[0]
            wants_redirect = (form.get("action") or [""])[0] == "redirect"
            try:
                done = await answer(
                    self.home,
                    thread,
                    (form.get("report") or [""])[0],
                    form.get("keep") or [],
                    redirect if wants_redirect else None,
                )
            except GateRefusal as exc:
                notice, status = exc.message, 400
            else:
                await self._seen(done.seq)
                return RedirectResponse(
                    f"/gate/{quote(thread)}?posted={quote(done.body)}", status_code=303
                )
        run = build_run(self.feed.threads.get(thread, []), self.home.trust.trusted)
        if run is None:
            page = pages.message(
                "No such run",
                notice
                or f"No expedition in the room has the thread {thread}; find it on the Runs page.",
            )
            return HTMLResponse(page, status_code=404 if status == 200 else status)
        posted = request.query_params.get("posted")
        if posted:
            notice = f"Answered: {posted}. The brief (or the next Dig Report) appears below."
        return HTMLResponse(
            pages.gate(run, self._csrf(request), notice, bool(posted)), status_code=status
        )

    async def cancel(self, request: Request) -> Response:
        """The Runs page's cancel button: `bullpen cancel THREAD`, as the operator."""
        from agents.runtime.cancel import post_cancel
        from room.errors import BullpenError

        thread = request.path_params["thread"]
        form = await _form(request)
        if not self._csrf_ok(request, form):
            return _forbidden()
        reason = " ".join((form.get("reason") or [""])[0].split()) or "cancelled in the web view"
        try:
            async with self.home.client(self.home.society.operator) as client:
                done = await post_cancel(client, thread, reason)
        except BullpenError as exc:
            page = pages.message("Not cancelled", f"{exc.message}. Nothing was posted.")
            return HTMLResponse(page, status_code=400)
        await self._seen(int(done.get("seq", 0)))
        return RedirectResponse(f"/runs#run-{quote(thread)}", status_code=303)

    async def _seen(self, seq: int, timeout: float = 5.0) -> None:
        """Wait until the feed has read `seq`, so the next page shows the post."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.feed.seq < seq and loop.time() < deadline:
            await asyncio.sleep(0.005)

    async def status(self, request: Request) -> Response:
        return JSONResponse(self.feed.status())

    async def lines(self, request: Request) -> Response:
        flt = LineFilter.of(request.query_params)
        before = request.query_params.get("before", "")
        if not before.isdigit():
            return JSONResponse({"error": "before must be a seq, like before=1200"}, 400)
        found = await self.feed.before(int(before), FIRST_LINES, flt)
        body = b'{"lines":[' + b",".join(found) + b"]}"
        return Response(body, media_type="application/json")

    async def events(self, request: Request) -> Response:
        flt = LineFilter.of(request.query_params)
        resume = request.headers.get("last-event-id", "")
        count = request.query_params.get("n", "")
        first = min(int(count), 1000) if count.isdigit() else FIRST_LINES
        return StreamingResponse(
            self._stream(flt, int(resume) if resume.isdigit() else None, first),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    async def _stream(
        self, flt: LineFilter, resume: int | None, first: int
    ) -> AsyncIterator[bytes]:
        feed = self.feed
        queue = feed.subscribe()
        try:
            if not feed.caught_up.is_set():  # say where the view is while it reads the room
                yield b"retry: 1000\n\n" + _status(feed)
                await feed.caught_up.wait()
            backlog = feed.after(resume, flt) if resume is not None else feed.newest(first, flt)
            sent = resume if resume is not None else feed.seq
            chunks = [b"retry: 1000\n\n", _status(feed)]
            chunks += [b"id: %d\nevent: line\ndata: %s\n\n" % (_seq(raw), raw) for raw in backlog]
            if backlog:
                sent = max(sent, _seq(backlog[-1]))
            yield b"".join([*chunks, b"event: ready\ndata: {}\n\n"])
            while not self.stopping.is_set():
                try:
                    item = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield b": keepalive\n\n" + _status(feed)
                    continue
                if item is None:
                    return
                out = []
                while item is not None:
                    if item["kind"] == "line":
                        line = item["line"]
                        if line["seq"] > sent and flt.matches(line):
                            out.append(
                                b"id: %d\nevent: line\ndata: %s\n\n" % (line["seq"], item["raw"])
                            )
                            sent = line["seq"]
                    else:
                        out.append(_status(feed))
                    item = queue.get_nowait() if not queue.empty() else None
                if out:
                    yield b"".join(out)
        finally:
            feed.unsubscribe(queue)

    async def favicon(self, request: Request) -> Response:
        data = files("agents.web").joinpath("static", "favicon.svg").read_bytes()
        return Response(data, media_type=STATIC_TYPES[".svg"])

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        suffix = name[name.rfind(".") :] if "." in name else ""
        if "/" in name or name.startswith(".") or suffix not in STATIC_TYPES:
            return Response("not found", 404)
        try:
            data = files("agents.web").joinpath("static", name).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return Response("not found", 404)
        return Response(data, media_type=STATIC_TYPES[suffix])


def _seq(raw: bytes) -> int:
    return int(json.loads(raw)["seq"])


def _status(feed: Feed) -> bytes:
    return b"event: status\ndata: %s\n\n" % json.dumps(feed.status()).encode()


def _store_down() -> Response:
    page = pages.message(
        "The web view cannot use its session file",
        "Nothing was changed. Its log (journalctl --user -u bullpen-web) says why; free disk "
        "space or fix state/web-sessions.sqlite in the home, then try again.",
    )
    return HTMLResponse(page, status_code=503)


def _forbidden() -> Response:
    page = pages.message(
        "Refused: the form's CSRF token is missing or wrong",
        "Nothing was posted. Reload the page and submit the form from it again.",
    )
    return _with_headers(HTMLResponse(page, status_code=403))

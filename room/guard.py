"""Connection guard: slow, idle and half-open connections are cut, and each listener is bounded.

uvicorn cuts a keep-alive connection that idles after a response
(`timeout_keep_alive`), but not one that never finishes its request head: a
client that connects and sends nothing, or trickles a header a byte at a
time (slowloris), holds its socket for ever. With enough of them the hub
runs out of file descriptors and the operator's `bullpen say` cannot get in.

`guarded_protocol` wraps uvicorn's httptools protocol with three rules:

- head timeout: a request head (a fresh connection's first, or the next one
  on a keep-alive connection once its first byte arrived) must be complete
  within `head_timeout_s`, else the connection is closed;
- body timeout: a request's body must be complete within `body_timeout_s`
  of its head, else the connection is closed;
- a bound per listener: at `max_connections`, a new connection makes room
  by closing the connection that has waited longest without a request being
  served (idle, half-open or trickling: never one whose request is being
  answered, such as a lurker's long-poll); when every connection is busy,
  the new one is closed at once (accept-and-close). The flooder's oldest
  idle sockets go first, so a fresh client that sends its request at once
  (the operator's `bullpen say`) always gets in.

And one rule for broken input: bytes that are not HTTP, arriving after one
or more whole requests on the same connection (pipelined), are answered
400 only after every whole request before them was answered, in order.
uvicorn closed the connection at once, so a post that was stored lost its
200 and its poster could not know it landed (issue 23). Garbage inside a
request still being read ends that request: it was never whole, nothing
is stored. A request asking to switch protocols (`Upgrade: websocket`,
`h2c`) is refused the same way: the hub serves HTTP/1.1 only, loads no
websocket library, and answers it with a 400 that says so, not with the
app's reading of a body the parser never handed on (nor uvicorn's
per-request warning to install one, a log line any caller could repeat).

Nothing is logged per connection (a flood would flood the log); the counts
are on `/health` under "connections".
"""

from __future__ import annotations

import asyncio
import resource
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import httptools
import structlog
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from room.direct import Exchange, Handler

log = structlog.get_logger("room.guard")

RESERVED_FDS = 256  # the room, the journal, logs, the lock, NATS: not for clients
INVALID = "Invalid HTTP request received."
NO_UPGRADE = "This server does not switch protocols: send the request without an Upgrade header."


@dataclass
class ConnectionGuard:
    """One listener's open connections and what was cut, shared by its protocol instances."""

    max_connections: int
    head_timeout_s: float
    body_timeout_s: float
    open: int = 0
    idle: OrderedDict[Any, None] = field(default_factory=OrderedDict)  # waiting, oldest first
    cut_slow: int = 0  # head or body not in time
    cut_full: int = 0  # closed to make room, or refused at the bound

    def stats(self) -> dict[str, int]:
        return {
            "open": self.open,
            "max": self.max_connections,
            "cut_slow": self.cut_slow,
            "cut_full": self.cut_full,
        }

    def make_room(self) -> bool:
        """At the bound, close the longest-waiting idle connection; False when none can go."""
        if self.open < self.max_connections:
            return True
        for victim in self.idle:
            self.idle.pop(victim)
            self.cut_full += 1
            victim.transport.abort()  # frees the descriptor now, not after a FIN dance
            return True
        return False


def guarded_protocol(guard: ConnectionGuard) -> type[HttpToolsProtocol]:
    """An HttpToolsProtocol class bound to one listener's guard (pass it as uvicorn's `http`)."""

    class Guarded(HttpToolsProtocol):
        # The head or body deadline (loop time), None when nothing is being waited for; one
        # lazy timer watches it: re-arming per request is a float, not a timer (the post path).
        _deadline: float | None = None
        _timer: asyncio.TimerHandle | None = None
        _counted = False
        _broken = ""  # why the rest is unread (not HTTP, an upgrade): answer what is whole, 400

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if not guard.make_room():
                guard.cut_full += 1
                transport.abort()
                return
            guard.open += 1
            self._counted = True
            guard.idle[self] = None
            self._arm(guard.head_timeout_s)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            guard.idle.pop(self, None)
            if self._counted:
                guard.open -= 1
                self._counted = False
            cycle = self.cycle
            if isinstance(cycle, Exchange) and not cycle.response_complete:
                cycle.lost()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._broken:
                return  # the parser stopped at the garbage; nothing after it is read
            if self._deadline is None and self in guard.idle:
                self._arm(guard.head_timeout_s)  # the next request's head has begun
            self._unset_keepalive_if_required()
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                self._refuse_after_answers(NO_UPGRADE)
            except httptools.HttpParserError:
                self._refuse_after_answers(INVALID)

        def _should_upgrade(self) -> bool:
            """Every request asking to switch protocols is one to refuse (see NO_UPGRADE):
            uvicorn then starts no app for it and reads nothing after its head."""
            return True

        def _refuse_after_answers(self, reason: str) -> None:
            """Garbage or an upgrade: 400 now, or once every whole request before it is
            answered."""
            self._broken = reason
            self.flow.pause_reading()
            cycle = self.cycle
            if cycle is not None and cycle.more_body and not cycle.response_started:
                # The garbage is inside this request: it was never whole and gets no answer.
                queued = [item for item in self.pipeline if item[0] is cycle]
                if queued:  # behind a request still being answered: the 400 follows that one
                    self.pipeline.remove(queued[0])
                    return
            elif cycle is not None and not cycle.response_complete:
                return  # whole and being answered (or queued): on_response_complete sends the 400
            self._disarm()
            self.send_400_response(self._broken)

        def on_headers_complete(self) -> None:
            self._disarm()
            guard.idle.pop(self, None)
            self._arm(guard.body_timeout_s)
            direct = self._direct_handler()
            if direct is None:
                super().on_headers_complete()
                return
            handler, query = direct
            version = self.parser.get_http_version()
            exchange = Exchange(
                self,
                handler,
                self.headers,
                query,
                version != "1.0" and self.parser.should_keep_alive(),
                self.expect_100_continue,
            )
            existing, self.cycle = self.cycle, exchange  # type: ignore[assignment]
            if existing is None or existing.response_complete:
                exchange.take_turn()
            else:  # pipelined behind a request still being answered: in order, as uvicorn does
                self.flow.pause_reading()
                self.pipeline.appendleft((exchange, self.app))  # type: ignore[arg-type]

        def _direct_handler(self) -> tuple[Handler, bytes] | None:
            """The app's own handler for this request and its query string, when the app takes
            it directly (POST /say on a hub listener: room/direct.py); None sends it through
            ASGI (a percent-encoded path too: uvicorn decodes it)."""
            handler: Handler | None = getattr(self.app, "direct", None)
            if handler is None or self.parser.get_method() != b"POST":
                return None
            if self.parser.should_upgrade():
                return None
            url = httptools.parse_url(self.url)
            return (handler, url.query or b"") if url.path == b"/say" else None

        def on_body(self, body: bytes) -> None:
            cycle = self.cycle
            if isinstance(cycle, Exchange):
                cycle.feed(body)
            else:
                super().on_body(body)

        def on_message_complete(self) -> None:
            self._disarm()
            cycle = self.cycle
            if isinstance(cycle, Exchange):
                cycle.whole()
            else:
                super().on_message_complete()

        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            if isinstance(cycle, Exchange):  # its turn, after the requests before it
                cycle.take_turn()
            else:
                super()._start_asgi_task(cycle, app)

        def on_response_complete(self) -> None:
            queued = bool(self.pipeline)  # super() starts the next one, if any
            super().on_response_complete()
            if self.transport.is_closing():
                return
            if self._broken:
                if not queued:  # the last whole request is answered: now the garbage's 400
                    self._unset_keepalive_if_required()
                    self.send_400_response(self._broken)
                return
            guard.idle[self] = None  # uvicorn's keep-alive timeout watches it now

        def _arm(self, seconds: float) -> None:
            deadline = self._deadline = self.loop.time() + seconds
            timer = self._timer
            if timer is not None and timer.when() <= deadline:
                return  # it fires first and looks again (_check)
            if timer is not None:
                timer.cancel()
            self._timer = self.loop.call_at(deadline, self._check)

        def _disarm(self) -> None:
            self._deadline = None  # the timer, if any, finds nothing to do when it fires

        def _check(self) -> None:
            self._timer = None
            deadline = self._deadline
            if deadline is None:
                return
            if self.loop.time() < deadline:  # re-armed since: wait for the new deadline
                self._timer = self.loop.call_at(deadline, self._check)
                return
            self._deadline = None
            if not self.transport.is_closing():
                guard.cut_slow += 1
                self.transport.abort()

    return Guarded


def raise_fd_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit; return the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1 << 20)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit", soft=soft, hard=hard, error=str(exc))
    return soft


def connection_bound(wanted: int, listeners: int, fd_limit: int) -> int:
    """`wanted` per listener, cut down so every listener's bound fits in the descriptors left."""
    fits = max(16, (fd_limit - RESERVED_FDS) // max(1, listeners))
    if wanted > fits:
        log.warning(
            "max_connections lowered to fit the open-file limit",
            wanted=wanted,
            lowered_to=fits,
            fd_limit=fd_limit,
        )
        return fits
    return wanted

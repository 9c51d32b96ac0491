"""`bullpen web` and `bullpen web url`: serve the view, and print a one-time login link.

The server runs on the hub's stack (uvicorn behind the hub's connection
guard, room/hub.py serve_asgi) at `[web] listen` (default 127.0.0.1:8070),
reads the room through the hub's strict listener with the read token, and
checks the hub's signed checkpoint when the room's folder is on this host.
Its one file of its own is the session file (agents/web/sessions.py).

Exit codes: 0 after a clean stop, 1 when it cannot listen, 78 for a
configuration error (systemd does not restart on it).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import structlog

from agents.config import WebConfig, parse_address
from agents.home import Home
from agents.web.app import WebApp
from agents.web.auth import Auth, load_token, login_query
from agents.web.feed import Feed
from agents.web.sessions import SessionStore, store_file
from room.errors import ConfigError
from room.hub import Serving, bind, serve_asgi
from room.version import __version__

log = structlog.get_logger("agents.web")

EXIT_OK, EXIT_START, EXIT_CONFIG = 0, 1, 78


def web_config(home: Home) -> WebConfig:
    """The home's [web] section, or its defaults when there is none."""
    return home.society.web or WebConfig()


def login_url(home: Home) -> str:
    return f"{web_config(home).base_url()}/login?{login_query(load_token(home.root))}"


class CheckpointView:
    """The hub's last signed checkpoint, checked against the chain the feed audited."""

    def __init__(self, home: Home, feed: Feed) -> None:
        from room.service import checkpoint_file

        self.path = checkpoint_file(home.room_path)
        self.home = home
        self.feed = feed
        self._seen: tuple[float, Any] | None = None

    def __call__(self) -> dict[str, Any]:
        from trust import checkpoint

        try:
            stamp = self.path.stat().st_mtime
        except OSError:
            return {"state": "none", "text": "no checkpoint file on this host"}
        if self._seen is None or self._seen[0] != stamp:
            try:
                mark: Any = checkpoint.load(self.path, self.home.trust.hub_public_key)
            except ConfigError as exc:
                mark = exc.message
            self._seen = (stamp, mark)
        mark = self._seen[1]
        if isinstance(mark, str):
            return {"state": "bad", "text": mark}
        known = self.feed.chain.hashes.get(mark.seq)
        if mark.seq > self.feed.chain.audited:
            state = "ahead"
        elif known is None:
            state = "unchecked"
        else:
            state = "ok" if known == mark.head else "bad"
        return {"state": state, "seq": mark.seq, "ts": mark.ts}


async def run_web(home: Home) -> int:
    try:
        config = web_config(home)
        host, port = parse_address(config.listen, "[web] listen")
        key = load_token(home.root)
        token = home.read_token()
        store = SessionStore(store_file(home.root))
    except (ConfigError, ValueError) as exc:
        print(f"bullpen web: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        sock = bind(host, port)
    except OSError as exc:
        store.close()
        print(
            f"bullpen web: cannot listen on {config.listen} ({exc.strerror}); stop what uses "
            "it or choose another [web] listen in society.toml",
            file=sys.stderr,
        )
        return EXIT_START
    feed = Feed(home.society.hub.strict_url(), token)
    feed.extra_status = CheckpointView(home, feed)
    app = WebApp(home, feed, Auth(key, store))
    serving = Serving(on_stop=[app.stopping.set, feed.close_streams])
    feed.start()

    def ready() -> None:
        log.info("web listening", listen=config.listen, url=config.base_url(), version=__version__)

    try:
        await serve_asgi([(app.asgi, sock)], ready, serving)
    finally:
        await feed.aclose()
        store.close()
    log.info("web stopped")
    return serving.signals.exit_code(EXIT_OK)


def serve(home: Home) -> int:
    try:
        import uvloop

        return uvloop.run(run_web(home))
    except ImportError:
        return asyncio.run(run_web(home))

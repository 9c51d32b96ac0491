"""Sessions that end: a spent login link stays spent across a restart of the web view, and a
logout ends the session on the server, so the old cookie reads nothing afterwards.

A real hub and a real `bullpen web` process, killed and started again as systemd would;
the requests are plain HTTP, as an attacker holding a link or a cookie would make them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agents.web.auth import COOKIE
from agents.web.sessions import store_file
from tests.support import HTTP, Proc, Society
from tests.web.browser import add_web, csrf_of, login_url, wait_web

PAGES = ["/", "/room", "/runs", "/society", "/gate/exp-1", "/events", "/api/status"]
PAGES += ["/api/lines?before=5", "/static/app.js"]


class Site:
    def __init__(self, society: Society, base: str) -> None:
        self.society, self.base = society, base
        self.web: Proc | None = None

    @property
    def root(self) -> Path:
        return self.society.root

    def start(self) -> None:
        self.web = self.society.spawn("web", "web")
        wait_web(self.base)

    def restart(self) -> None:
        """SIGKILL (no clean shutdown to save anything) and start again."""
        assert self.web is not None
        self.web.kill()
        self.start()

    def login(self) -> str:
        """A fresh link redeemed over plain HTTP; the session cookie it set."""
        answer = HTTP.get(login_url(self.root, cli=True), follow_redirects=False, timeout=10)
        assert answer.status_code == 303, answer.text
        return str(answer.cookies[COOKIE])

    def get(self, path: str, cookie: str) -> httpx.Response:
        with httpx.Client(base_url=self.base, cookies={COOKIE: cookie}, timeout=10) as client:
            if path == "/events":  # a stream: the status line is all this needs
                with client.stream("GET", path) as answer:
                    answer.close()
                    return answer
            return client.get(path)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    society = Society(tmp_path_factory.mktemp("web-sessions") / "home")
    built = Site(society, add_web(society))
    try:
        society.start_hub()
        built.start()
        yield built
    finally:
        society.stop_all()


def test_a_spent_link_is_still_spent_after_the_web_view_restarts(site: Site) -> None:
    """A link used once is refused after a SIGKILL and restart (its nonce was on disk before
    the session was granted); the session it opened still reads pages; the file is 0600."""
    url = login_url(site.root, cli=True)
    first = HTTP.get(url, follow_redirects=False, timeout=10)
    assert first.status_code == 303
    cookie = str(first.cookies[COOKIE])
    site.restart()
    again = HTTP.get(url, follow_redirects=False, timeout=10)
    assert again.status_code == 403, again.text
    assert "bullpen web url" in again.text and COOKIE not in again.headers.get("set-cookie", "")
    assert site.get("/room", cookie).status_code == 200  # sessions outlive a restart
    assert stat.S_IMODE(os.stat(store_file(site.root)).st_mode) == 0o600


def test_logout_ends_the_session_on_every_page_and_across_a_restart(site: Site) -> None:
    """After logout the old cookie gets the login page (401) on every page, the stream and
    the API, before a restart and after; another session is not touched."""
    cookie, other = site.login(), site.login()
    page = site.get("/room", cookie)
    assert page.status_code == 200
    with httpx.Client(base_url=site.base, cookies={COOKIE: cookie}, timeout=10) as client:
        out = client.post("/logout", data={"csrf": csrf_of(page.text)})
        assert out.status_code == 200 and "Logged out" in out.text
    for restarted in (False, True):
        if restarted:
            site.restart()
        for path in PAGES:
            answer = site.get(path, cookie)
            assert answer.status_code == 401, (path, restarted)
        refused = site.get("/room", cookie)
        assert "bullpen web url" in refused.text
        assert site.get("/room", other).status_code == 200
    before = len(site.society.lines())
    with httpx.Client(base_url=site.base, cookies={COOKIE: cookie}, timeout=10) as client:
        posted = client.post("/gate/exp-1", data={"action": "confirm", "csrf": csrf_of(page.text)})
    assert posted.status_code == 401 and len(site.society.lines()) == before

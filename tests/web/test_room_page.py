"""The Room page in a real browser: live without reload, escaped, behind a session and CSRF.

One home per module: a real hub and a real `bullpen web` process, started as
a user would, and one headless chromium (tests/web/browser.py).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.web.feed import Chain, Feed, LineFilter, split_answer
from room.chain import GENESIS, line_hash
from tests.support import HTTP, Proc, Society, wait_for
from tests.web.browser import (
    add_web,
    chromium,
    csrf_of,
    login,
    login_url,
    row_with,
    rows,
    say,
    session_client,
    wait_web,
)


class Site:
    def __init__(self, society: Society, base: str, web: Proc, hub: Proc, driver: Any) -> None:
        self.society, self.base, self.web, self.hub, self.driver = society, base, web, hub, driver

    @property
    def root(self) -> Path:
        return self.society.root

    def say(self, body: str, **fields: Any) -> dict[str, Any]:
        return say(self.root, body, **fields)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    society = Society(tmp_path_factory.mktemp("web-room") / "home")
    base = add_web(society)
    driver = None
    try:
        hub = society.start_hub()
        web = society.spawn("web", "web")
        wait_web(base)
        driver = chromium()
        login(driver, society.root)
        yield Site(society, base, web, hub, driver)
    finally:
        if driver is not None:
            driver.quit()
        society.stop_all()


def open_room(site: Site, query: str = "") -> None:
    site.driver.get(f"{site.base}/room{query}")
    wait_for(
        lambda: site.driver.execute_script("return document.getElementById('log').dataset.ready"),
        10,
        "the Room page's stream to be ready",
    )


class TestSession:
    def test_without_a_session_every_page_and_the_stream_are_refused(self, site: Site) -> None:
        """No cookie (or a forged one): every page, the SSE stream, the API and the static
        files answer 401, and a POST to the gate posts nothing."""
        before = len(site.society.lines())
        paths = ["/", "/room", "/runs", "/society", "/gate/exp-1", "/events", "/api/status"]
        paths += ["/api/lines?before=5", "/static/app.js", "/static/style.css"]
        for cookie in ({}, {"bullpen_session": "1.2.3"}):
            with httpx.Client(base_url=site.base, cookies=cookie, timeout=5) as client:
                for path in paths:
                    answer = client.get(path)
                    assert answer.status_code == 401, path
                    assert "bullpen web url" in answer.text
                answer = client.post("/gate/exp-1", data={"action": "confirm"})
                assert answer.status_code == 401
        assert len(site.society.lines()) == before

    def test_a_login_link_works_once_and_sets_a_strict_httponly_cookie(self, site: Site) -> None:
        """The link from `bullpen web url` logs in once; the token file is 0600; used again
        the link is refused."""
        url = login_url(site.root, cli=True)
        assert url.startswith(f"{site.base}/login?")
        first = HTTP.get(url, follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/room"
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert HTTP.get(url, follow_redirects=False).status_code == 403
        token = site.root / "secrets" / "web-token"
        assert stat.S_IMODE(os.stat(token).st_mode) == 0o600
        assert token.read_text().strip() not in url  # the link carries a MAC, not the token

    def test_a_form_without_its_csrf_token_is_refused(self, site: Site) -> None:
        """With a session but no (or a wrong) CSRF token, POSTs answer 403 and nothing is posted."""
        before = len(site.society.lines())
        with session_client(site.root) as client:
            page = client.get(f"{site.base}/room")
            assert page.status_code == 200
            good = csrf_of(page.text)
            for form in ({"action": "confirm"}, {"action": "confirm", "csrf": "0" * 64}):
                answer = client.post(f"{site.base}/gate/exp-1", data=form)
                assert answer.status_code == 403 and "Nothing was posted" in answer.text
                assert client.post(f"{site.base}/logout", data=form).status_code == 403
            assert client.post(f"{site.base}/logout", data={"csrf": good}).status_code == 200
        assert len(site.society.lines()) == before


class TestRoomPage:
    def test_a_post_appears_on_the_open_page_without_a_reload(self, site: Site) -> None:
        """A post made after the page opened shows up in its log, verified, with no reload."""
        open_room(site)
        site.driver.execute_script("window.notReloaded = 1")
        stored = site.say("hello from the terminal")
        row = row_with(site.driver, "hello from the terminal")
        assert row.get_attribute("data-seq") == str(stored["seq"])
        assert "verified" in row.text
        assert site.driver.execute_script("return window.notReloaded") == 1

    def test_a_body_full_of_script_renders_as_text(self, site: Site) -> None:
        """`<script>` and an `onerror` image in a body show as their text and never run."""
        open_room(site)
        body = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"><b>bold</b>'
        site.say(body)
        row = row_with(site.driver, "window.pwned = 1")
        from selenium.webdriver.common.by import By

        assert row.find_element(By.CSS_SELECTOR, ".body").text == body
        assert row.find_elements(By.CSS_SELECTOR, "img, b, script") == []
        assert site.driver.execute_script("return window.pwned === undefined")
        site.driver.refresh()  # the backlog at first paint is escaped the same way
        row_with(site.driver, "window.pwned = 1")
        assert site.driver.execute_script("return window.pwned === undefined")

    def test_the_first_lines_are_in_the_html_escaped_before_any_script_runs(
        self, site: Site
    ) -> None:
        """The Room page's HTML holds its newest lines (a one-shot screenshot, or a browser with
        scripts off, is not blank), escaped; the live stream then adds no second copy."""
        body = "<script>window.pwned = 3</script> first paint"
        stored = site.say(body)
        anchor = f'id="seq-{stored["seq"]}"'
        with session_client(site.root) as client:

            def page_holding_it() -> str | None:
                html: str = client.get(f"{site.base}/room").text
                return html if anchor in html else None

            # the web view follows the hub's long-poll, a few ms behind the post's ack
            html = wait_for(page_holding_it, 15, "the Room page's HTML to hold the new line")
        assert "&lt;script&gt;window.pwned = 3&lt;/script&gt; first paint" in html
        assert "<script>window.pwned" not in html
        open_room(site)
        assert sum("first paint" in text for text in rows(site.driver)) == 1
        assert site.driver.execute_script("return window.pwned === undefined")

    def test_the_filters_of_tail_apply_to_the_backlog_and_live_lines(self, site: Site) -> None:
        """?from=…&type=… keeps only matching lines, before and after the page opened."""
        site.say("a chat line")
        site.say("an ask line", type="ask")
        open_room(site, "?type=ask&from=operator")
        row_with(site.driver, "an ask line")
        site.say("a second ask", type="ask")
        site.say("a later chat")
        row_with(site.driver, "a second ask")
        bodies = rows(site.driver)
        assert bodies and not any("chat line" in b or "later chat" in b for b in bodies)

    def test_the_chain_status_shows_the_audited_seq(self, site: Site) -> None:
        """The chain line says the hub is connected and how far the chain was checked."""
        open_room(site)
        last = site.say("one more")["seq"]
        row_with(site.driver, "one more")
        from selenium.webdriver.common.by import By

        chain = site.driver.find_element(By.ID, "chain")
        wait_for(lambda: f"audited to seq {last} of {last}" in chain.text, 10, "the chain status")
        assert "hub connected" in chain.text and "broken" not in chain.get_attribute("class")

    def test_the_page_keeps_working_after_a_hub_restart(self, site: Site) -> None:
        """Stop the hub under an open page, start it again: the next post still shows live."""
        open_room(site)
        from selenium.webdriver.common.by import By

        site.hub.stop()
        site.society.procs.remove(site.hub)
        chain = site.driver.find_element(By.ID, "chain")
        wait_for(lambda: "unreachable" in chain.text, 30, "the page to say the hub is away")
        site.hub = site.society.start_hub()
        site.say("after the restart")
        row_with(site.driver, "after the restart", 30)
        wait_for(lambda: "hub connected" in chain.text, 10, "the page to say the hub is back")


class TestChainAudit:
    def test_a_changed_or_missing_line_is_reported_at_its_seq(self) -> None:
        """The feed's audit names the first bad seq: a changed prev, then a gap."""
        one = b'{"seq":1,"prev":"' + GENESIS.encode() + b'"}'
        two = b'{"seq":2,"prev":"' + line_hash(one).encode() + b'"}'
        chain = Chain()
        for raw in (one, two):
            chain.check(raw, json.loads(raw))
        assert chain.audited == 2 and chain.broken_seq is None
        chain.check(b'{"seq":3,"prev":"bad"}', {"seq": 3, "prev": "bad"})
        assert chain.broken_seq == 3 and chain.audited == 2 and "changed" in chain.broken_reason
        gap = Chain()
        gap.check(one, json.loads(one))
        gap.check(b'{"seq":5}', {"seq": 5})
        assert gap.broken_seq == 2 and "missing" in gap.broken_reason

    def test_a_read_answer_is_split_into_its_exact_line_bytes(self) -> None:
        """Each line's bytes come out exactly as the hub sent them (the chain hashes them)."""
        lines = [b'{"seq":1,"body":"a,\\"],b"}', '{"seq":2,"body":"é ]"}'.encode()]
        body = b'{"messages":[' + b",".join(lines) + b'],"last_seq":7}'
        found, last = split_answer(body)
        assert [raw for raw, _ in found] == lines and last == 7
        assert split_answer(b'{"messages":[],"last_seq":0}') == ([], 0)

    def test_the_filter_matches_like_tail(self) -> None:
        """thread, from, to (bare or @) and type must all hold."""
        flt = LineFilter.of({"from": "@ann", "to": "bob", "type": "ask"})
        assert flt.matches({"from": "ann", "to": "@bob", "type": "ask"})
        assert not flt.matches({"from": "ann", "to": "@bob", "type": "chat"})


class TestScrollBack:
    def test_lines_older_than_memory_are_read_from_the_hub(self, site: Site) -> None:
        """A feed that keeps only the newest lines still pages back through the whole room,
        reading what it no longer holds from the hub, oldest first and filtered."""
        import asyncio

        for n in range(6):
            site.say(f"scrollback {n}")

        async def page_back() -> tuple[list[int], list[int], int]:
            feed = Feed(site.society.strict_url, site.society.home.read_token(), keep=3)
            feed.start()
            try:
                await asyncio.wait_for(feed.caught_up.wait(), 20)
                head = feed.seq
                everything = await feed.before(head + 1, 1000, LineFilter())
                mine = await feed.before(head + 1, 4, LineFilter(sender="operator"))
                return (
                    [json.loads(r)["seq"] for r in everything],
                    [json.loads(r)["seq"] for r in mine],
                    feed.first_seq,
                )
            finally:
                await feed.aclose()

        seqs, mine, first = asyncio.run(page_back())
        assert first > 1  # memory no longer holds the start of the room
        assert seqs == list(range(1, seqs[-1] + 1))
        assert len(mine) == 4 and mine == sorted(mine) and mine[-1] == seqs[-1]

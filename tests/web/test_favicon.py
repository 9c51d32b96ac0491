"""The web view's icon: `bullpen web` serves it at /favicon.ico to anyone (a browser asks for
it on the login page too), and every page names it, so no browser console shows a 404."""

from __future__ import annotations

from pathlib import Path

from tests.support import HTTP, Society
from tests.web.browser import add_web, wait_web


def test_the_icon_is_served_without_a_session_and_named_by_each_page(tmp_path: Path) -> None:
    society = Society(tmp_path / "home")
    base = add_web(society)
    try:
        society.start_hub()
        society.spawn("web", "web")
        wait_web(base)
        icon = HTTP.get(f"{base}/favicon.ico", timeout=5)
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
        assert icon.content.startswith(b"<svg") and b"</svg>" in icon.content
        assert "content-security-policy" in icon.headers
        page = HTTP.get(f"{base}/room", timeout=5)  # no session: the log-in-first page
        assert page.status_code == 401
        assert '<link rel="icon" href="/favicon.ico" type="image/svg+xml">' in page.text
        assert HTTP.get(f"{base}/favicon.icox", timeout=5).status_code == 401  # only the icon
    finally:
        society.stop_all()

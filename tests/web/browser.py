"""A real headless browser for the web view's tests, bench and screenshots.

Debian's chromium driven through its chromedriver (/usr/bin/chromedriver,
both from apt, see .ci/run): Selenium is given the driver's path and told
to stay offline, so nothing is ever downloaded at run time. In a container
running as root chromium needs --no-sandbox.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.support import HTTP, Society, free_port, run_cli, wait_for

CHROMIUM = os.environ.get("BULLPEN_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("BULLPEN_CHROMEDRIVER", "/usr/bin/chromedriver")


def chromium(width: int = 1280, height: int = 900) -> Any:
    """A headless chromium; fails (never skips) when Debian's chromium or its driver is missing."""
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a driver or browser
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        assert shutil.which(path), (
            f"{path} is missing: install Debian's chromium and chromium-driver "
            "(apt-get install chromium chromium-driver; .ci/run does)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def add_web(society: Society) -> str:
    """Give the home a [web] section on a free port; its base URL."""
    port = free_port()
    path = society.root / "society.toml"
    path.write_text(path.read_text() + f'\n[web]\nlisten = "127.0.0.1:{port}"\n')
    return f"http://127.0.0.1:{port}"


def wait_web(base: str, timeout: float = 30.0) -> None:
    """Until the web view answers (401 without a session) and has read the room."""

    def answers() -> bool:
        try:
            return HTTP.get(f"{base}/room", timeout=2).status_code == 401
        except httpx.HTTPError:
            return False

    wait_for(answers, timeout, "bullpen web to answer")


def login_url(root: Path, *, cli: bool = False) -> str:
    """A fresh one-time login link: from `bullpen web url`, or the function behind it."""
    if not cli:
        from agents.home import Home
        from agents.web.server import login_url as link

        return link(Home(root))
    done = run_cli(root, "web", "url")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def login(driver: Any, root: Path) -> None:
    """Open a fresh one-time link in the browser: it lands on the Room page with a session."""
    driver.get(login_url(root))
    wait_for(lambda: driver.current_url.endswith("/room"), 10, "the login to land on /room")


@contextlib.contextmanager
def session_client(root: Path) -> Iterator[httpx.Client]:
    """An HTTP client holding a session, as the browser would after logging in."""
    with httpx.Client(timeout=10) as client:
        answer = client.get(login_url(root), follow_redirects=False)
        assert answer.status_code == 303, answer.text
        yield client


FIND_ROW = """
const text = arguments[0];
for (const li of document.querySelectorAll('#lines li.line')) {
  if (li.querySelector('.body').textContent.includes(text)) return li.id;
}
return null;
"""


def rows(driver: Any) -> list[str]:
    """The text of every row of the page's log."""
    return driver.execute_script(  # type: ignore[no-any-return]
        "return [...document.querySelectorAll('#lines li.line')].map(li => li.textContent)"
    )


def row_with(driver: Any, text: str, timeout: float = 10.0) -> Any:
    """The log row whose body holds `text`, once the page shows it."""
    from selenium.webdriver.common.by import By

    found = wait_for(
        lambda: driver.execute_script(FIND_ROW, text), timeout, f"a row saying {text!r}"
    )
    return driver.find_element(By.ID, found)


def say(root: Path, body: str, to: str = "@echo", **fields: Any) -> dict[str, Any]:
    """Post as the operator, with its proof, and return the stored line (the hub's ack)."""
    import asyncio

    from agents.home import Home

    async def post() -> dict[str, Any]:
        home = Home(root)
        async with home.client(home.society.operator) as client:
            return await client.say(to, body, **fields)

    return asyncio.run(post())


def csrf_of(html: str) -> str:
    import re

    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, "the page carries no CSRF token"
    return found.group(1)

"""The gate, Runs and Society pages in a real browser, over a real `bullpen up`.

One home per module: `bullpen up` starts the hub, the expedition's lurkers
and `bullpen web` ([web] configured); one real expedition is run to its Dig
Report by `bullpen expedition`, then answered from the browser.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agents.expedition.command import answer_post
from agents.web.society import up_pids
from tests.support import Society, run_cli, start_up, wait_for
from tests.web.browser import add_web, chromium, csrf_of, login, row_with, session_client, wait_web

# What an expedition needs; the backpass's lurkers and the echo are left out to start fast.
EXPEDITION_NICKS = (
    "foreman",
    "context",
    "termgen",
    "retriever",
    "scorer",
    "scotoma",
    "excerpter",
    "briefer",
)


def keep_only(root: Path, nicks: tuple[str, ...]) -> None:
    """Remove every [nicks.X] table of society.toml but those named."""
    path = root / "society.toml"
    text = path.read_text()
    for nick in re.findall(r"^\[nicks\.([a-z0-9_-]+)\]$", text, flags=re.M):
        if nick not in nicks:
            pattern = rf"^\[nicks\.{re.escape(nick)}\]\n(?:(?!\[).*\n?)*"
            text = re.sub(pattern, "", text, count=1, flags=re.M)
    path.write_text(text)


class Site:
    def __init__(self, society: Society, base: str, thread: str, driver: Any) -> None:
        self.society, self.base, self.thread, self.driver = society, base, thread, driver

    @property
    def root(self) -> Path:
        return self.society.root


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    society = Society(tmp_path_factory.mktemp("web-gate") / "home", demo=True)
    keep_only(society.root, EXPEDITION_NICKS)
    base = add_web(society)
    driver = None
    try:
        start_up(society)
        wait_web(base, 60)
        done = run_cli(
            society.root,
            "expedition",
            "--title",
            "Waiting Is Part of the Work",
            "--keyword",
            "patience",
            "--wait-timeout",
            "240",
            timeout=300,
        )
        assert done.returncode == 0 and "=== DIG REPORT ===" in done.stdout, done.stderr
        thread = re.search(r"expedition (exp-[0-9a-f]+) started", done.stderr).group(1)  # type: ignore[union-attr]
        driver = chromium()
        login(driver, society.root)
        yield Site(society, base, thread, driver)
    finally:
        if driver is not None:
            driver.quit()
        society.stop_all()


def operator_replies(site: Site) -> list[dict[str, Any]]:
    return [
        m
        for m in site.society.lines()
        if m["from"] == "operator" and m["type"] == "reply" and m.get("thread") == site.thread
    ]


@pytest.mark.long
def test_the_gate_refuses_bad_answers_then_confirms_with_a_drop(site: Site) -> None:
    """Bad answers get a message and post nothing; a confirm that drops the deep cut posts what
    `bullpen expedition confirm --drop row_2` posts, and the brief arrives on the page without
    that row; the same form sent again is stale and posts nothing."""
    from selenium.webdriver.common.by import By

    driver = site.driver
    driver.get(f"{site.base}/runs")
    section = driver.find_element(By.CSS_SELECTOR, f'section.run[data-thread="{site.thread}"]')
    assert "waiting" in section.get_attribute("class")
    section.find_element(By.CSS_SELECTOR, "a.gate-link").click()
    wait_for(lambda: driver.find_elements(By.ID, "gate-form"), 10, "the gate's form")
    report = driver.find_element(By.NAME, "report").get_attribute("value")
    # The Dig Report is shown once, in its box; the run's news below leaves it out.
    wait_for(
        lambda: driver.execute_script("return document.getElementById('log').dataset.ready"),
        10,
        "the news",
    )
    news = driver.execute_script("return document.getElementById('lines').textContent")
    assert "=== DIG REPORT ===" in driver.find_element(By.CSS_SELECTOR, "pre.report").text
    assert "=== DIG REPORT ===" not in news
    boxes = {b.get_attribute("value"): b for b in driver.find_elements(By.NAME, "keep")}
    assert {"row_1", "row_2", "row_12"} <= set(boxes)

    before = len(site.society.lines())
    with session_client(site.root) as client:
        page = client.get(f"{site.base}/gate/{site.thread}")
        csrf = csrf_of(page.text)
        bad = {
            "The redirect is empty": (
                site.thread,
                {"action": "redirect", "redirect": "  ", "report": report},
            ),
            "There is no expedition with the thread exp-nope": ("exp-nope", {"report": report}),
            "already answered or a newer one replaced it": (site.thread, {"report": "01NOPE"}),
            "The Dig Report lists no row row_99": (
                site.thread,
                {"report": report, "keep": ["row_1", "row_99"]},
            ),
        }
        for said, (thread, form) in bad.items():
            answer = client.post(
                f"{site.base}/gate/{thread}", data={"csrf": csrf, "action": "confirm", **form}
            )
            assert answer.status_code in (400, 404), said
            assert said in answer.text and "othing was posted" in answer.text, answer.text
    assert len(site.society.lines()) == before

    boxes["row_2"].click()  # keep everything but the deep cut
    driver.find_element(By.ID, "confirm").click()
    brief = row_with(driver, "brief written:", 120)
    assert "notice" in driver.page_source and "Answered: confirm, drop row_2" in driver.page_source

    (reply,) = operator_replies(site)
    body, data = answer_post(["row_2"])
    assert (reply["body"], reply["data"], reply["in_reply_to"]) == (body, data, report)
    assert reply["verified"] is True and reply["to"] == "@foreman"
    path = Path(brief.text.split("brief written:")[1].split()[0])
    front = yaml.safe_load(path.read_text().split("---\n")[1])
    assert "2024-04-lime-mortar" not in str(front)  # the dropped deep cut is not in the brief
    assert "2024-03-glue-up" in path.read_text()  # a kept one is

    with session_client(site.root) as client:
        csrf = csrf_of(client.get(f"{site.base}/runs").text)
        again = client.post(
            f"{site.base}/gate/{site.thread}",
            data={"csrf": csrf, "action": "confirm", "report": report, "keep": ["row_1"]},
        )
    assert again.status_code == 400 and "othing was posted" in again.text
    assert len(operator_replies(site)) == 1


def test_the_runs_and_society_pages_show_the_run_and_its_members(site: Site) -> None:
    """Runs: the expedition's steps, answered, with the seat that judged; Society: every
    lurker `bullpen up` started is alive, trusted and privileged."""
    from selenium.webdriver.common.by import By

    driver = site.driver
    driver.get(f"{site.base}/runs")
    section = driver.find_element(By.CSS_SELECTOR, f'section.run[data-thread="{site.thread}"]')
    steps = section.find_elements(By.CSS_SELECTOR, "li.step")
    assert len(steps) >= 6
    termgen = next(s for s in steps if "@termgen" in s.text)
    assert "answered" in termgen.get_attribute("class") and "seat " in termgen.text
    assert "expedition" in section.text

    driver.get(f"{site.base}/society")
    table = {
        row.get_attribute("data-nick"): row.text
        for row in driver.find_elements(By.CSS_SELECTOR, "#members tr[data-nick]")
    }
    assert set(table) == set(EXPEDITION_NICKS)
    pids = up_pids(site.society.home)  # `bullpen up` started the web view with the rest
    assert set(pids) == {"hub", "web", *EXPEDITION_NICKS}
    for nick, text in table.items():
        assert "alive (bullpen up)" in text and "python step" in text and "secret" in text, nick


def test_a_redirect_from_the_gate_digs_again(site: Site) -> None:
    """A redirect typed on the gate posts what `confirm --redirect` posts, and the page shows
    the new Dig Report when the foreman has dug again."""
    from selenium.webdriver.common.by import By

    done = run_cli(site.root, "expedition", "--title", "Fire", "--keyword", "patience",
                   "--wait-timeout", "240", timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    thread = re.search(r"expedition (exp-[0-9a-f]+) started", done.stderr).group(1)  # type: ignore[union-attr]
    driver = site.driver
    driver.get(f"{site.base}/gate/{thread}")
    driver.find_element(By.ID, "redirect").send_keys("kilns and ovens")
    driver.find_element(By.ID, "do-redirect").click()
    row_with(driver, "Redirected: kilns and ovens", 120)
    (reply,) = [
        m
        for m in site.society.lines()
        if m["from"] == "operator" and m["type"] == "reply" and m.get("thread") == thread
    ]
    assert (reply["body"], reply["data"]) == answer_post(redirect="kilns and ovens")

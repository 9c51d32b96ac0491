"""Take the screenshots in docs/ from the real pages: `python -m tests.web.screenshots docs`.

A demo home with `bullpen up` (every lurker, and `bullpen web`), a few posts
(one full of `<script>`), a trust check, a backpass, one expedition
confirmed from its gate and one left waiting at its Dig Report; then a
headless chromium saves each page as a PNG.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from tests.support import Society, run_cli, start_up, wait_for
from tests.web.browser import add_web, chromium, login, row_with, say, wait_web

TITLE = ("--title", "Waiting Is Part of the Work", "--keyword", "patience", "--wait-timeout", "300")


def expedition(root: Path) -> str:
    done = run_cli(root, "expedition", *TITLE, timeout=400)
    assert done.returncode == 0, done.stderr
    return re.search(r"expedition (exp-[0-9a-f]+) started", done.stderr).group(1)  # type: ignore[union-attr]


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bullpen-shots-") as tmp:
        society = Society(Path(tmp) / "home", demo=True)
        base = add_web(society)
        driver = None
        try:
            start_up(society)
            wait_web(base, 120)
            say(society.root, "good morning: the kiln is lit, the glaze tests are drying")
            confirmed = expedition(society.root)
            run_cli(society.root, "backpass", "--report-only", timeout=600)
            run_cli(society.root, "trust", "check", "--wait-timeout", "60", timeout=300)
            waiting = expedition(society.root)
            driver = chromium(1280, 1000)
            login(driver, society.root)
            from selenium.webdriver.common.by import By

            driver.get(f"{base}/gate/{confirmed}")
            driver.find_elements(By.NAME, "keep")[1].click()
            driver.find_element(By.ID, "confirm").click()
            row_with(driver, "brief written:", 120)
            say(society.root, "<script>alert('not run')</script> is shown as text", to="@echo")
            driver.get(f"{base}/room")
            wait_for(
                lambda: driver.execute_script(
                    "return document.getElementById('log').dataset.ready"
                ),
                20,
                "the Room page",
            )
            driver.save_screenshot(str(out / "web-room.png"))
            driver.get(f"{base}/runs")
            height = driver.execute_script("return document.body.scrollHeight")
            driver.set_window_size(1280, min(int(height) + 40, 3000))
            driver.save_screenshot(str(out / "web-runs.png"))
            driver.set_window_size(1280, 1000)
            driver.get(f"{base}/gate/{waiting}")
            driver.save_screenshot(str(out / "web-gate.png"))
            driver.get(f"{base}/society")
            driver.save_screenshot(str(out / "web-society.png"))
        finally:
            if driver is not None:
                driver.quit()
            society.stop_all()
    for name in ("room", "runs", "gate", "society"):
        print(out / f"web-{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")))

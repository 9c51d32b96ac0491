"""Benchmark `bullpen web`: first paint of the Room page and SSE ack→DOM latency, in a browser.

    python bench/web.py            # a 100,000-line room, 100 posts
    python bench/web.py --quick    # a 10,000-line room, 30 posts

A real hub and a real `bullpen web` on a synthetic chained room, a real
headless chromium (tests/web/browser.py). First paint is read from the
browser's own clock: its first contentful paint, and the moment the newest
lines are in the DOM (the page's `lines-shown` mark). The baseline is the
same page over a 1,000-line room, measured in the same run: the ratio says
whether the page's cost grows with the room (it should not: only the
newest 200 lines are sent). Latency is from each post's ack (the poster's
clock) to the moment a MutationObserver in the page sees its row (the
browser's clock; one machine, one wall clock); its baseline is a plain
long-poll reader of the hub's /read seeing the same post.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.room import synthetic_room  # noqa: E402
from bench.table import percentile, print_table  # noqa: E402
from tests.support import Society, wait_for  # noqa: E402
from tests.web.browser import add_web, chromium, login, session_client, wait_web  # noqa: E402

OBSERVE = """
window.seenAt = {};
new MutationObserver(function (records) {
  const now = performance.timeOrigin + performance.now();
  for (const r of records) for (const n of r.addedNodes) {
    if (n.dataset && n.dataset.seq) window.seenAt[n.dataset.seq] = now;
  }
}).observe(document.getElementById('lines'), {childList: true});
"""


def start(base: Path, lines: int) -> tuple[Society, str]:
    society = Society(base)
    synthetic_room(society.room, lines)
    url = add_web(society)
    society.start_hub()
    society.spawn("web", "web")
    wait_web(url, 60)
    with session_client(society.root) as client:
        wait_for(
            lambda: client.get(f"{url}/api/status").json()["seq"] >= lines,
            300,
            "the web view to read the room",
        )
    return society, url


def first_paint(driver: Any, url: str, repeats: int) -> tuple[float, float]:
    """Median ms to first contentful paint and to the newest lines in the DOM."""
    fcp, shown = [], []
    for _ in range(repeats):
        driver.get(f"{url}/room")
        wait_for(
            lambda: driver.execute_script(
                "return performance.getEntriesByName('lines-shown').length"
            ),
            30,
            "the newest lines",
        )
        marks = driver.execute_script(
            "return [performance.getEntriesByName('first-contentful-paint')[0]?.startTime || 0,"
            " performance.getEntriesByName('lines-shown')[0].startTime]"
        )
        fcp.append(float(marks[0]))
        shown.append(float(marks[1]))
    return statistics.median(fcp), statistics.median(shown)


def hub_reader(society: Society, after: int, count: int, seen: dict[int, float]) -> None:
    """A plain long-poll reader of /read: the baseline a page cannot beat."""
    headers = society.read_headers()
    with httpx.Client(base_url=society.strict_url, headers=headers, timeout=40) as client:
        while len(seen) < count:
            answer = client.get("/read", params={"after": after, "wait": 25}).json()
            now = time.time() * 1000
            for line in answer["messages"]:
                seen.setdefault(int(line["seq"]), now)
            after = answer["last_seq"]


async def post_all(society: Society, count: int) -> dict[int, float]:
    home = society.home
    acks: dict[int, float] = {}
    async with home.client(home.society.operator) as client:
        for n in range(count):
            stored = await client.say("@sink", f"latency probe {n}")
            acks[int(stored["seq"])] = time.time() * 1000
            await asyncio.sleep(0.02)
    return acks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    big, posts = (10_000, 30) if args.quick else (100_000, 100)
    rows: list[tuple[str, ...]] = [("measure", "value", "baseline", "ratio", "goal")]
    with tempfile.TemporaryDirectory(prefix="bullpen-bench-web-") as tmp:
        driver = chromium()
        try:
            small, small_url = start(Path(tmp) / "small", 1_000)
            login(driver, small.root)
            base_fcp, base_shown = first_paint(driver, small_url, 5)
            small.stop_all()
            society, url = start(Path(tmp) / "big", big)
            login(driver, society.root)
            fcp, shown = first_paint(driver, url, 5)
            rows.append(
                (f"first contentful paint, {big:,} lines", f"{fcp:.0f} ms", f"{base_fcp:.0f} ms",
                 f"{fcp / max(base_fcp, 1):.2f}", "")
            )  # fmt: skip
            rows.append(
                (f"newest lines shown, {big:,} lines", f"{shown:.0f} ms", f"{base_shown:.0f} ms",
                 f"{shown / max(base_shown, 1):.2f}", "< 500 ms")
            )  # fmt: skip
            driver.execute_script(OBSERVE)
            seen: dict[int, float] = {}
            reader = threading.Thread(
                target=hub_reader, args=(society, big, posts, seen), daemon=True
            )
            reader.start()
            acks = asyncio.run(post_all(society, posts))
            wait_for(
                lambda: len(driver.execute_script("return window.seenAt")) >= posts,
                30,
                "every probe on the page",
            )
            reader.join(30)
            dom = {int(k): v for k, v in driver.execute_script("return window.seenAt").items()}
            page = [dom[seq] - at for seq, at in acks.items()]
            plain = [seen[seq] - at for seq, at in acks.items() if seq in seen]
            for name, q in (("p50", 0.5), ("p99", 0.99)):
                rows.append(
                    (f"ack → DOM {name}, {posts} posts", f"{percentile(page, q):.1f} ms",
                     f"{percentile(plain, q):.1f} ms", f"{percentile(page, q) / max(percentile(plain, q), 0.1):.1f}",
                     "< 100 ms" if name == "p99" else "")
                )  # fmt: skip
            society.stop_all()
        finally:
            driver.quit()
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

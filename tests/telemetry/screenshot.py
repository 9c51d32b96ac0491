"""docs/telemetry-phoenix.png: a run's trace in Arize Phoenix, taken from the real page.

    python -m tests.telemetry.screenshot docs

A demo home's expedition through the gateway (tests/telemetry/runs.py), exported with
`bullpen trace --otlp` to a Phoenix started on free ports, opened in headless chromium.
"""

from __future__ import annotations

import base64
import sys
import tempfile
from pathlib import Path

from room.traceids import trace_id
from tests.support import run_cli, wait_for
from tests.telemetry.phoenix import start_phoenix
from tests.telemetry.runs import record_expedition
from tests.web.browser import chromium


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bullpen-phoenix-shot-") as tmp:
        phoenix = start_phoenix(Path(tmp) / "phoenix")
        run = None
        driver = None
        try:
            run = record_expedition(Path(tmp) / "home")
            done = run_cli(run.society.root, "trace", run.thread, "--otlp", phoenix.url)
            assert done.returncode == 0, done.stderr
            project = base64.b64encode(b"Project:1").decode()
            driver = chromium(1400, 900)
            driver.get(f"{phoenix.url}/projects/{project}/traces/{trace_id(run.thread)}")
            wait_for(
                lambda: (
                    "invoke_agent" in driver.page_source
                    and "chat fake-bridge" in driver.page_source
                ),
                60,
                "Phoenix to show the trace",
            )
            driver.save_screenshot(str(out / "telemetry-phoenix.png"))
        finally:
            if driver is not None:
                driver.quit()
            if run is not None:
                run.stop()
            phoenix.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")))

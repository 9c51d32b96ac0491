"""`--log-format`: a long-running command logs lines for people (structlog's console renderer)
on a terminal or when asked, JSON lines when not a terminal or when asked."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support import Society, bullpen_argv, wait_for


def _hub_log(society: Society, *flags: str) -> str:
    log = society.root / f"hub{len(flags)}{'-'.join(flags)}.log"
    with log.open("wb") as out:
        hub = subprocess.Popen(
            [*bullpen_argv(society.root, *flags, "hub")],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_for(lambda: "hub listening" in log.read_text(), 30, "the hub to listen")
    finally:
        hub.terminate()
        hub.wait(20)
    return next(line for line in log.read_text().splitlines() if "hub listening" in line)


def test_console_when_asked_json_when_piped(tmp_path: Path) -> None:
    society = Society(tmp_path / "home")
    piped = _hub_log(society)  # not a terminal, no flag: JSON
    assert json.loads(piped)["event"] == "hub listening"
    human = _hub_log(society, "--log-format", "console")
    assert not human.lstrip().startswith("{") and "[info" in human and "hub listening" in human
    asked = _hub_log(society, "--log-format", "json")
    assert json.loads(asked)["level"] == "info"

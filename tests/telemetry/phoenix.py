"""Arize Phoenix on 127.0.0.1 free ports: a real OTLP receiver no one here wrote.

`arize-phoenix` is in the test extra. Where it is not installed the tests
that need it skip, except in CI (CI=true), where they fail saying why: CI
installs the test extra, so a missing Phoenix there is a broken CI.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import HTTP, free_port, wait_for

START_S = 180.0  # Phoenix migrates its SQLite database at first start: slow on a busy machine


@dataclass
class Phoenix:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def need_phoenix() -> None:
    """Skip without Phoenix and its client; under CI=true, fail saying how to get them."""
    missing = [m for m in ("phoenix", "phoenix.client") if importlib.util.find_spec(m) is None]
    if not missing:
        return
    why = (
        f"Arize Phoenix is not installed ({', '.join(missing)} not importable): "
        "pip install -e '.[test]' brings arize-phoenix and arize-phoenix-client"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def start_phoenix(folder: Path, tries: int = 3) -> Phoenix:
    """Phoenix on free ports, up when its own log says it listens; on a port another program
    took meanwhile (this machine is shared), again on new ports."""
    need_phoenix()
    problem = ""
    for attempt in range(tries):
        phoenix = _start(folder / f"try{attempt}")
        if phoenix.process.poll() is None:
            return phoenix
        problem = phoenix.log.read_text(errors="replace")[-2000:]
    raise AssertionError(f"Phoenix did not start in {tries} tries; its last log:\n{problem}")


def _start(folder: Path) -> Phoenix:
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(folder),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = folder / "phoenix.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "phoenix.server.main", "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    phoenix = Phoenix(process, port, log)
    listening = f"Uvicorn running on http://127.0.0.1:{port}"

    def up() -> bool:
        if process.poll() is not None:
            return True
        return listening in log.read_text(errors="replace") and _healthy(phoenix)

    try:
        wait_for(up, START_S, "Phoenix to listen and answer /healthz")
    except AssertionError:
        phoenix.stop()
        raise
    return phoenix


def _healthy(phoenix: Phoenix) -> bool:
    try:
        return HTTP.get(f"{phoenix.url}/healthz", timeout=2).status_code == 200
    except Exception:
        return False

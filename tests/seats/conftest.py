"""Fixtures for the seat tests: the two fake models, run as the real programs they are."""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agents.seats import LocalAnswer, register_local, unregister_local
from tests.support import HTTP

FAKES = Path(__file__).resolve().parents[1] / "fakes"
FAKE_MODEL = FAKES / "fake_model.py"
FAKE_OPENAI = FAKES / "fake_openai.py"


@dataclass
class FakeModel:
    """tests/fakes/fake_model.py with its script, state and log in a temp folder."""

    folder: Path
    script: dict[str, Any] = field(default_factory=dict)

    @property
    def log(self) -> Path:
        return self.folder / "fake_model.log"

    def table(self, **extra: Any) -> dict[str, Any]:
        """A `[seats.x]` table running the fake with this script."""
        script_file = self.folder / "script.json"
        script_file.write_text(json.dumps(self.script), encoding="utf-8")
        return {
            "kind": "cmd",
            "command": [sys.executable, str(FAKE_MODEL)],
            "env": {
                "FAKE_MODEL_SCRIPT": str(script_file),
                "FAKE_MODEL_STATE": str(self.folder / "state.json"),
                "FAKE_MODEL_LOG": str(self.log),
            },
            **extra,
        }

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]


@pytest.fixture
def fake_model(tmp_path: Path) -> FakeModel:
    folder = tmp_path / "fake_model"
    folder.mkdir()
    return FakeModel(folder)


@dataclass
class FakeServer:
    """A running tests/fakes/fake_openai.py process."""

    process: subprocess.Popen[str]
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[dict[str, Any]]:
        response = HTTP.get(f"http://127.0.0.1:{self.port}/_fake/requests", timeout=5)
        response.raise_for_status()
        return response.json()


def _read_port(process: subprocess.Popen[str], timeout: float = 10.0) -> int:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            pytest.fail(f"fake_openai printed no port within {timeout} s")
    line = process.stdout.readline()
    if not line.strip().isdigit():
        pytest.fail(f"fake_openai's first line is not a port: {line!r}")
    return int(line)


@pytest.fixture
def fake_openai(tmp_path: Path) -> Iterator[Callable[..., FakeServer]]:
    """Start fake OpenAI servers with a script; every one is stopped after the test."""
    started: list[subprocess.Popen[str]] = []

    def start(script: dict[str, Any], *, reject_response_format: bool | str = False) -> FakeServer:
        script_file = tmp_path / f"openai-script-{len(started)}.json"
        script_file.write_text(json.dumps(script), encoding="utf-8")
        command = [sys.executable, str(FAKE_OPENAI), "--port", "0", "--script", str(script_file)]
        if reject_response_format is True:
            command.append("--reject-response-format")
        elif reject_response_format:
            command += ["--reject-response-format", reject_response_format]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        started.append(process)
        return FakeServer(process, _read_port(process))

    yield start
    for process in started:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
def local_answer() -> Iterator[Callable[[str, LocalAnswer], None]]:
    """Register local answers for a test and forget them afterwards."""
    steps: list[str] = []

    def register(step: str, answer: LocalAnswer) -> None:
        register_local(step, answer, replace=True)
        steps.append(step)

    yield register
    for step in steps:
        unregister_local(step)

"""The gateway's test kit: the fake llama.cpp server and the gateway, as real processes."""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support import HTTP, Proc, Society, free_port, wait_for

FAKE_LLAMACPP = Path(__file__).resolve().parents[1] / "fakes" / "fake_llamacpp.py"


@dataclass
class FakeBackend:
    """A running tests/fakes/fake_llamacpp.py."""

    process: subprocess.Popen[str]
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def behave(self, **changes: Any) -> None:
        HTTP.post(f"http://127.0.0.1:{self.port}/_fake/behave", json=changes, timeout=5)

    def requests(self) -> list[dict[str, Any]]:
        return HTTP.get(f"http://127.0.0.1:{self.port}/_fake/requests", timeout=5).json()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_printing_port(
    command: list[str], what: str, timeout: float = 10
) -> tuple[subprocess.Popen[str], int]:
    """Start a server that prints its port as its first line; the process and that port."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            process.kill()
            raise AssertionError(f"{what} printed no port within {timeout:g} s")
    return process, int(process.stdout.readline())


def start_fake(**behave: Any) -> FakeBackend:
    command = [sys.executable, str(FAKE_LLAMACPP), "--port", "0", "--behave", json.dumps(behave)]
    return FakeBackend(*start_printing_port(command, "fake_llamacpp"))


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def gateway_section(port: int, backends: dict[str, dict[str, Any]], **top: Any) -> str:
    """A `[gateway]` section in TOML: top-level keys and tables, then one table per backend."""
    lines = ["", "[gateway]", f'listen = "127.0.0.1:{port}"']
    tables = {k: v for k, v in top.items() if isinstance(v, dict)}
    lines += [f"{k} = {_value(v)}" for k, v in top.items() if not isinstance(v, dict)]
    for name, table in tables.items():
        lines += ["", f"[gateway.{name}]"]
        for key, value in table.items():
            lines.append(f"{json.dumps(key) if not key.isidentifier() else key} = {_value(value)}")
    for name, table in backends.items():
        lines += ["", f"[gateway.backends.{name}]"]
        lines += [f"{k} = {_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


class GatewayHome:
    """A Society whose society.toml has a [gateway] section, and its gateway process."""

    def __init__(self, society: Society) -> None:
        self.society = society
        self.port = free_port()
        self.proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def configure(self, backends: dict[str, dict[str, Any]], **top: Any) -> None:
        path = self.society.root / "society.toml"
        path.write_text(path.read_text() + gateway_section(self.port, backends, **top))

    def token(self, nick: str) -> str:
        from agents.gateway.tokens import issue

        return issue(self.society.home, nick).read_text().strip()

    def healthy(self) -> bool:
        """Our gateway answers /health (not another program that took the port meanwhile)."""
        try:
            answer = HTTP.get(f"{self.url}/health", timeout=1)
            return answer.status_code == 200 and answer.json().get("service") == "bullpen-gateway"
        except (httpx.HTTPError, ValueError, AttributeError):
            return False

    def start(self, env: dict[str, str] | None = None) -> Proc:
        """Start the gateway; when another program took its port meanwhile (this machine is
        shared, and a restart leaves the port free for a moment), move to a new one."""
        for _ in range(3):
            self.proc = self.society.spawn("gateway", "gateway", env=env)
            proc = self.proc

            def up(proc: Proc = proc) -> bool:
                return self.healthy() or not proc.alive()

            wait_for(up, 20, "the gateway to answer /health")
            if proc.alive() or "cannot listen" not in proc.output():
                break
            self._move()
        assert proc.alive(), f"the gateway exited:\n{proc.output()}"
        return proc

    def _move(self) -> None:
        path = self.society.root / "society.toml"
        old = f'listen = "127.0.0.1:{self.port}"'
        self.port = free_port()
        path.write_text(path.read_text().replace(old, f'listen = "127.0.0.1:{self.port}"'))

    def chat(self, token: str | None, model: str, **body: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        payload = {"model": model, "messages": [{"role": "user", "content": "hi"}], **body}
        return HTTP.post(
            f"{self.url}/v1/chat/completions", json=payload, headers=headers, timeout=30
        )

    def ledger(self) -> list[dict[str, Any]]:
        path = self.society.root / "gateway" / "ledger.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sse_text(response: httpx.Response) -> tuple[str, list[dict[str, Any]]]:
    """The streamed answer's text and every chunk, from a text/event-stream body."""
    chunks = []
    for line in response.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            chunks.append(json.loads(line[6:]))
    text = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )
    return text, chunks

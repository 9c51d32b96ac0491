"""The gateway's own HTTP/1.1 client against the fake llama.cpp server: reuse, restarts, streams."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from agents.gateway.http1 import Pool
from tests.gateway.helpers import FAKE_LLAMACPP, FakeBackend, start_fake


def _on_port(port: int) -> FakeBackend:
    command = [sys.executable, str(FAKE_LLAMACPP), "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert int(process.stdout.readline()) == port
    return FakeBackend(process, port)


def test_keep_alive_reuse_and_a_restarted_server() -> None:
    """Calls reuse one connection; after the server restarts, the stale one is dropped and the
    next call still succeeds on a fresh connection."""
    first = start_fake()
    port = first.port
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    body = json.dumps({"model": "m", "messages": []}).encode()
    second: FakeBackend | None = None

    async def run() -> tuple[list[int], int, int]:
        nonlocal second
        pool = Pool()
        opened = 0
        connect = pool._connect

        async def counting(*args: object) -> object:
            nonlocal opened
            opened += 1
            return await connect(*args)  # type: ignore[arg-type]

        pool._connect = counting  # type: ignore[method-assign]
        statuses = []
        for _ in range(3):
            answer = await pool.post(url, body, {})
            statuses.append(answer.status_code)
            assert b"hello world" in await answer.read()
        reused = opened
        first.stop()
        second = await asyncio.to_thread(_on_port, port)
        answer = await pool.post(url, body, {})
        statuses.append(answer.status_code)
        await answer.read()
        await pool.aclose()
        return statuses, reused, opened

    try:
        statuses, reused, opened = asyncio.run(run())
    finally:
        if second is not None:
            second.stop()
    assert statuses == [200, 200, 200, 200]
    assert reused == 1 and opened == 2


def test_streamed_lines_arrive_in_order() -> None:
    """A close-delimited event stream is read line by line to its end."""
    backend = start_fake(answer="abcdefgh", chunk=2)
    url = f"{backend.base_url}/chat/completions"

    async def run() -> list[str]:
        pool = Pool()
        answer = await pool.post(url, json.dumps({"stream": True}).encode(), {})
        lines = [line async for line in answer.lines() if line.startswith("data: {")]
        await answer.aclose()
        return [json.loads(line[6:])["choices"][0]["delta"]["content"] for line in lines]

    try:
        assert asyncio.run(run()) == ["ab", "cd", "ef", "gh"]
    finally:
        backend.stop()

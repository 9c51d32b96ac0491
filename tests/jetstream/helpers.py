"""What the JetStream tests share: signed posts, reading the room back, asking NATS directly."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import nats
from nats.aio.client import Client as NATS
from nats.js.client import JetStreamContext

from room.message import Post
from tests.support import HTTP, Society, bullpen_argv, wait_for
from trust.proof import SecretSigner

T = TypeVar("T")


def post(
    society: Society, to: str, body: str, *, kind: str = "ask", data: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A post by the operator, proved with the home's shared secret; the stored line."""
    payload: dict[str, Any] = {"from": "operator", "to": to, "type": kind, "body": body}
    if data is not None:
        payload["data"] = data
    payload.update(SecretSigner(society.secret()).prove(Post.model_validate(payload)))
    answer = HTTP.post(f"{society.strict_url}/say", content=json.dumps(payload), timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def read(society: Society, **params: Any) -> list[dict[str, Any]]:
    """Every matching line, read through the hub."""
    found: list[dict[str, Any]] = []
    after = 0
    while True:
        answer = HTTP.get(
            f"{society.strict_url}/read",
            params={**params, "after": after, "limit": 1000},
            headers=society.read_headers(),
        ).json()
        found += answer["messages"]
        if len(answer["messages"]) < 1000:
            return found
        after = answer["last_seq"]


def with_js(servers: list[str], action: Callable[[JetStreamContext], Awaitable[T]]) -> T:
    """Run one JetStream call against the test servers, from a synchronous test."""

    async def run() -> T:
        nc: NATS = await nats.connect(servers=servers, connect_timeout=5)
        try:
            return await action(nc.jetstream(timeout=10))
        finally:
            await nc.close()

    return asyncio.run(run())


@dataclass
class Finished:
    """One command run by `run_side_by_side`: its exit code, its stderr, and how long it took."""

    code: int
    stderr: str
    seconds: float


def run_side_by_side(
    home: Path, commands: dict[str, list[str]], timeout: float
) -> dict[str, Finished]:
    """Run several `bullpen` commands at once; fail (after killing them) if any outlives `timeout`."""
    started = time.monotonic()
    logs = home / "side-by-side"
    logs.mkdir(exist_ok=True)
    running: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    for name, args in commands.items():
        out = logs / f"{name}.err"
        with open(out, "wb") as err:
            running[name] = (
                subprocess.Popen(
                    bullpen_argv(home, *args),
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                ),
                out,
            )
    finished: dict[str, Finished] = {}
    try:

        def all_done() -> bool:
            for name, (proc, out) in running.items():
                if name not in finished and proc.poll() is not None:
                    finished[name] = Finished(
                        proc.returncode, out.read_text(errors="replace"), time.monotonic() - started
                    )
            return len(finished) == len(running)

        wait_for(all_done, timeout, f"{sorted(set(running) - set(finished))} to exit")
    finally:
        for proc, _ in running.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    return finished


def log_events(text: str) -> list[dict[str, Any]]:
    """The JSON log lines in a process's output (other lines are skipped)."""
    events = []
    for line in text.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
    return events

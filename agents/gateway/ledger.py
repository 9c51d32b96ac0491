"""The ledger: one JSON line per call through the gateway, durable before the answer ends.

    {"ts": "2026-12-01T20:41:07.113Z", "caller": "scorer", "model": "qwen2.5-7b",
     "backend": "local", "tokens_in": 812, "tokens_out": 64, "estimated": false,
     "latency_ms": 412.5, "status": 200, "flags": ["TEMPLATE_LEAK"]}

`record` returns once the line is written and fsynced, and the gateway
sends the end of an answer only after that: a gateway killed with SIGKILL
has every answered call in its ledger. Lines waiting at the same moment are
written and fsynced together (one fsync for many calls), which is what
keeps the ledger's cost per call small. The write and its fsync run as one
job on a thread of the ledger's own, so a slow disk never blocks the event
loop. (aiofiles was measured and left out here: it makes the write and the
fsync two trips to its executor, and on a loaded machine each trip waits
for a thread to be scheduled — bench/gateway.py showed it in the p50.) No line ever
holds a token, a key or a prompt: the fields above are all there is.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from room.errors import DurabilityError

__all__ = ["Ledger", "now_stamp", "read_entries"]


def now_stamp() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")
        self._pending: list[tuple[bytes, asyncio.Future[None]]] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self.failed: DurabilityError | None = None

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        self._fd = await asyncio.get_running_loop().run_in_executor(
            self._thread, lambda: os.open(self.path, flags, 0o600)
        )
        self._writer = asyncio.create_task(self._write_loop())

    async def close(self) -> None:
        if self._writer is not None:
            while self._pending:
                await asyncio.sleep(0.005)
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._thread.shutdown(wait=False)

    async def record(self, entry: dict[str, Any]) -> None:
        """Append `entry` as one line; return when it is on disk (DurabilityError if not)."""
        if self.failed is not None:
            raise self.failed
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((line, done))
        self._wake.set()
        await done

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, []
            if not batch:
                continue
            try:
                data = b"".join(line for line, _ in batch)
                await asyncio.get_running_loop().run_in_executor(self._thread, self._append, data)
            except OSError as exc:
                self.failed = DurabilityError(
                    f"cannot write the gateway ledger {self.path} ({exc.strerror or exc}); "
                    "free space or fix the disk, then restart the gateway"
                )
                for _, done in batch:
                    if not done.done():
                        done.set_exception(self.failed)
                continue
            for _, done in batch:
                if not done.done():
                    done.set_result(None)

    def _append(self, data: bytes) -> None:
        """One write of the whole batch (O_APPEND), then one fsync: on the ledger's thread."""
        assert self._fd is not None
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)


def read_entries(path: Path) -> Iterator[dict[str, Any]]:
    """Every whole line of a ledger (a line torn by a crash is skipped)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield entry

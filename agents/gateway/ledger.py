"""The ledger: one JSON line per call through the gateway, durable before the answer ends.

    {"ts": "2026-12-01T20:41:07.113Z", "caller": "scorer", "model": "qwen2.5-7b",
     "backend": "local", "tokens_in": 812, "tokens_out": 64, "estimated": false,
     "latency_ms": 412.5, "status": 200, "flags": ["TEMPLATE_LEAK"]}

`record` returns once the line is written and fsynced, and the gateway
sends the end of an answer only after that: a gateway killed with SIGKILL
has every answered call in its ledger. Lines waiting at the same moment are
written and fsynced together (one fsync for many calls), which is what
keeps the ledger's cost per call small. The writes go through aiofiles, on
its executor, so a slow disk never blocks the event loop. No line ever
holds a token, a key or a prompt: the fields above are all there is.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiofiles
import aiofiles.os

from room.errors import DurabilityError

__all__ = ["Ledger", "now_stamp", "read_entries"]

_fsync = aiofiles.os.wrap(os.fsync)  # type: ignore[no-untyped-call]


def now_stamp() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None
        self._pending: list[tuple[bytes, asyncio.Future[None]]] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self.failed: DurabilityError | None = None

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Unbuffered: each batch is one os.write, then one fsync: two hops to the executor.
        self._file = await aiofiles.open(self.path, "ab", buffering=0)
        self._writer = asyncio.create_task(self._write_loop())

    async def close(self) -> None:
        if self._writer is not None:
            while self._pending:
                await asyncio.sleep(0.005)
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
        if self._file is not None:
            await self._file.close()

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
                data = memoryview(b"".join(line for line, _ in batch))
                while data:
                    written = await self._file.write(data)
                    data = data[written:]
                await _fsync(self._file.fileno())
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

"""A program a handler started: feeding its stdin, keeping its output's tail, and stopping
it with everything it started in turn."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

__all__ = ["feed", "kill_group", "read_tail"]


async def read_tail(stream: asyncio.StreamReader | None, keep: int) -> bytes:
    """Read `stream` to its end, keeping only its last `keep` bytes (a chatty program's
    output costs no memory beyond them)."""
    if stream is None:
        return b""
    kept = bytearray()
    while chunk := await stream.read(65536):
        kept += chunk
        if len(kept) > keep:
            del kept[:-keep]
    return bytes(kept)


async def feed(stream: asyncio.StreamWriter | None, data: bytes) -> None:
    """Write the program's stdin and close it; a program that exits unread is its business."""
    if stream is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stream.write(data)
        await stream.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stream.close()
        await stream.wait_closed()


async def kill_group(proc: asyncio.subprocess.Process) -> None:
    """Stop the program we started and everything it started, and reap it."""
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            await asyncio.wait_for(proc.wait(), grace)
            break
        except TimeoutError:
            continue

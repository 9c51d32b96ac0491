"""One line typed at the terminal, read on the event loop: a prompt Ctrl-C can leave at once.

`input()` in a worker thread cannot be taken back: the thread keeps reading until Enter,
and it holds the interpreter's readline lock, so a second prompt (the cancel-or-detach
question after Ctrl-C) waited behind the first until Enter was pressed. Here the loop
watches stdin and reads what the terminal's line discipline hands over (the terminal
itself echoes and edits the line); cancelling the wait just stops watching, so the next
prompt is shown and answered at once.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TextIO

__all__ = ["read_line"]


async def read_line(prompt: str, out: TextIO | None = None, fd: int | None = None) -> str:
    """The next line typed (without its newline); EOFError at end of input (Ctrl-D)."""
    out = out or sys.stdout
    fd = sys.stdin.fileno() if fd is None else fd
    print(prompt, end="", file=out, flush=True)
    loop = asyncio.get_running_loop()
    got: asyncio.Future[bytes] = loop.create_future()
    buffer = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError as exc:
            if not got.done():
                got.set_exception(exc)
            return
        if not chunk:  # end of input
            if not got.done():
                got.set_exception(EOFError())
            return
        buffer.extend(chunk)
        if b"\n" in buffer and not got.done():
            got.set_result(bytes(buffer.split(b"\n", 1)[0]))

    loop.add_reader(fd, readable)
    try:
        line = await got
    finally:
        loop.remove_reader(fd)
    return line.decode(errors="replace").rstrip("\r")

"""When no inotify instance is left, a lurker long-polls the hub instead, and says so."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator

import pytest

from tests.support import Society, wait_for
from tests.test_lurker import say, wait_reply

_libc = ctypes.CDLL("libc.so.6", use_errno=True)


@pytest.fixture
def no_inotify_left() -> Iterator[int]:
    """Hold every inotify instance this user may have (fs.inotify.max_user_instances)."""
    held: list[int] = []
    try:
        while len(held) < 100_000:
            fd = _libc.inotify_init1(os.O_CLOEXEC)
            if fd < 0:
                break
            held.append(fd)
        assert _libc.inotify_init1(os.O_CLOEXEC) < 0, "could not exhaust inotify instances"
        yield len(held)
    finally:
        for fd in held:
            os.close(fd)


# It holds every inotify instance of this user: a test running beside it in another worker
# could free one for this lurker, or be starved itself. README runs `-m serial` on its own.
@pytest.mark.serial
def test_lurker_falls_back_to_the_hub(society: Society, no_inotify_left: int) -> None:
    """With inotify exhausted, the lurker logs the fallback and still answers through the hub."""
    society.start_hub()
    lurker = society.spawn("lurk-echo", "lurk", "echo")
    wait_for(
        lambda: "long-polling the hub" in lurker.output() or not lurker.alive(), 20, "the fallback"
    )
    assert lurker.alive(), lurker.output()
    assert "inotify" in lurker.output()
    ask = say(society, "@echo", "still there?")
    assert wait_reply(society, ask["id"])["body"] == "echo: still there?"

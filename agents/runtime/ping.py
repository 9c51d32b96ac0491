"""Ping lurkers from the room: the one way bullpen asks "is @nick listening?".

A lurker answers an ask whose data is `{"ping": true}` itself, before any
handler (agents.runtime.wake.is_ping), so a pong proves the process runs, reads
the room and can post. `bullpen trust check` pings every nick and also judges
each pong's address and verified flag; the commands that start a run ping the
foreman before posting their ask, so nobody waits on a run nothing will take.

A pong also says where and on what it runs (pong_identity): the host, the boot, and
the SHA-256 of the society.toml the lurker loaded, so a process still running on a file
edited since it started is found before it refuses work (config_drift).
"""

from __future__ import annotations

import functools
import secrets
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from room.errors import BullpenError
from room.version import __version__

if TYPE_CHECKING:
    from agents.home import Home
    from room.client import RoomClient

BOOT_ID = "/proc/sys/kernel/random/boot_id"
WAITING_S = 5.0  # how often a wait on missing replies says so


@functools.cache
def boot_id() -> str | None:
    """This machine's boot id (Linux): a host name can be reused, a boot id cannot; None
    where the kernel has none to give."""
    try:
        with open(BOOT_ID, encoding="ascii") as file:
            return file.read().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def pong_identity(home: Home) -> dict[str, Any]:
    """The fields a pong carries about the process that sends it, beyond its nick: one
    place to add what a pre-flight must know of every lurker (a version, a toolchain)."""
    return {
        "version": __version__,
        "host": socket.gethostname(),
        "boot_id": boot_id(),
        "society_sha256": home.society_sha256,
    }


def restart_hint(nick: str) -> str:
    return (
        f"run `systemctl --user restart bullpen-lurker@{nick}`, or restart `bullpen up` "
        "if it runs the society"
    )


def config_drift(home: Home, nick: str, pong: dict[str, Any]) -> str | None:
    """Why `nick`'s pong shows it runs on another society.toml than this home's, or None.

    A pong that names no digest (a lurker older than the field) proves nothing either way.
    """
    data = pong.get("data") or {}
    theirs = data.get("society_sha256")
    if not isinstance(theirs, str) or theirs == home.society_sha256:
        return None
    if elsewhere(data):
        return None  # its own host's file may differ by design: other_host_society says so
    return (
        f"restart needed: society.toml changed since {nick} started (it runs sha256 "
        f"{theirs[:12]}, {home.society_file} is now {home.society_sha256[:12]}); "
        f"{restart_hint(nick)}"
    )


def elsewhere(data: dict[str, Any]) -> bool:
    """Whether a pong's data names another host than this one."""
    host = data.get("host")
    return isinstance(host, str) and host != socket.gethostname()


def other_host_society(home: Home, nick: str, pong: dict[str, Any]) -> str | None:
    """A note when `nick` runs on another host with another society.toml than this one's.

    Not a refusal: with a hub per host (a JetStream room), each host's file names its own
    hub's address, so the files differ by design; from here nobody can tell that from an
    edit made there without a restart. The note says what to check.
    """
    data = pong.get("data") or {}
    theirs = data.get("society_sha256")
    if not isinstance(theirs, str) or theirs == home.society_sha256 or not elsewhere(data):
        return None
    return (
        f"@{nick} on host {data.get('host')} runs a society.toml (sha256 {theirs[:12]}) that "
        f"differs from {home.society_file} here (sha256 {home.society_sha256[:12]}): fine "
        "where only that host's own sections differ (its hub's address); if it was edited "
        f"there since @{nick} started, restart it there: {restart_hint(nick)}"
    )


@dataclass
class Pings:
    """What came back: each nick's first reply to its own ping, and pings that were not sent."""

    thread: str
    pongs: dict[str, dict[str, Any]] = field(default_factory=dict)
    unsent: dict[str, BullpenError] = field(default_factory=dict)  # nick -> why not posted
    silent: list[str] = field(default_factory=list)  # asked, no reply before the deadline


async def ping(
    client: RoomClient, nicks: Iterable[str], timeout: float, *, label: str = "ping"
) -> Pings:
    """Ping every nick in one thread and wait up to `timeout` s for all their replies.

    A reply counts for a nick only when it answers that nick's own ask and comes from
    that nick: a line anyone else posts in the thread proves nothing.
    """
    return await ask_each(client, nicks, "ping", {"ping": True}, timeout, label=label)


async def ask_each(
    client: RoomClient,
    nicks: Iterable[str],
    body: str,
    data: dict[str, Any] | Callable[[str], dict[str, Any]],
    timeout: float,
    *,
    label: str,
    verified_only: bool = False,
    waiting: Callable[[list[str], float], None] | None = None,
) -> Pings:
    """Ask every nick one question its lurker answers itself (a ping, a pre-flight), in one
    thread, and wait up to `timeout` s for their replies. `data` may be made per nick;
    `verified_only` counts a reply only when the hub proved its poster; `waiting(silent,
    seconds)` is called about every WAITING_S while replies are missing, to say so."""
    result = Pings(thread=f"{label}-{secrets.token_hex(4)}")
    asked: dict[str, str] = {}  # ask id -> nick
    after = None
    for nick in nicks:
        try:
            stored = await client.say(
                f"@{nick}",
                body,
                type="ask",
                data=data(nick) if callable(data) else data,
                thread=result.thread,
            )
        except BullpenError as exc:
            result.unsent[nick] = exc
            continue
        asked[str(stored.get("id"))] = nick
        seq = int(stored.get("seq", 0))
        after = seq - 1 if after is None else min(after, seq - 1)
    started = time.monotonic()
    deadline = started + timeout
    said = started
    cursor = after or 0
    while asked and time.monotonic() < deadline:
        now = time.monotonic()
        if waiting is not None and now - said >= WAITING_S:
            waiting(sorted(asked.values()), now - started)
            said = now
        left = max(0.1, deadline - now)
        wait = min(left, WAITING_S if waiting is not None else 5.0)
        lines, cursor = await client.read(cursor, 1000, thread=result.thread, wait=wait)
        for line in lines:
            asker = str(line.get("in_reply_to") or "")
            pinged = asked.get(asker)
            if pinged is None or line.get("from") != pinged:
                continue
            if verified_only and line.get("verified") is not True:
                continue
            del asked[asker]
            result.pongs[pinged] = line
    result.silent = list(asked.values())
    return result

"""The host boundary, said where a step meets it (seed 002 §8.2).

A path means something only together with a host. @sandbox makes the build dir on
its host; @testdesigner and the grinder must then see that same folder. When one does
not (it runs on another host, or in another mount namespace of the same one), the
step's failure names both sides: which nick on which host could not see what, and
which nick on which host made it, and how to fix it. It never says "create it here":
an empty folder of that name is not the campaign, and git would then answer `fatal:
not a git repository`.

Who made the build dir is read from the room: @sandbox's reply names its host (its
data's `host`), and the foreman hands that on in the later asks as `made_by`.
"""

from __future__ import annotations

import re
import socket
from typing import Any

__all__ = ["made_by", "maker", "not_the_baseline", "not_visible"]

_NICK = re.compile(r"[a-z][a-z0-9_-]{0,31}")
FIX = (
    "Run @{nick} where @{maker} runs, or give both hosts one shared build root ({root}). "
    "`bullpen build` checks this before it posts a ticket: see `bullpen docs scaling`, "
    '"Placement checked first", and "Files travel through the store" for the object store'
)


def made_by(nick: str, reply: dict[str, Any]) -> dict[str, Any]:
    """What the foreman hands on of the step that made the build dir: its nick and host."""
    return {"nick": nick, "host": reply.get("host"), "baseline": reply.get("baseline")}


def maker(data: dict[str, Any]) -> dict[str, str] | None:
    """The ask's `made_by`, checked (it came through the room): nick, host, baseline."""
    found = data.get("made_by")
    if not isinstance(found, dict):
        return None
    nick, host = str(found.get("nick") or ""), found.get("host")
    if not _NICK.fullmatch(nick) or not isinstance(host, str) or not host.isprintable():
        return None
    baseline = str(found.get("baseline") or "")
    return {"nick": nick, "host": host[:253], "baseline": baseline[:40]}


def _same_name(here: str, there: str) -> str:
    if here != there:
        return ""
    return (
        f" Both call their host {here}, yet they do not see one filesystem (a container, "
        "a mount namespace, or two machines of one name)."
    )


def not_visible(nick: str, repo: str, real: str, made: dict[str, str], root: str) -> str:
    """Why `nick` here cannot see the build dir `made` says its maker prepared."""
    here = socket.gethostname()
    baseline = f" (baseline {made['baseline'][:12]})" if made["baseline"] else ""
    return (
        f"HOST BOUNDARY: @{nick} on host {here} cannot see the build dir {real} (REPO "
        f"{repo}): it was made by @{made['nick']} on host {made['host']}{baseline} and is not "
        f"visible on host {here}.{_same_name(here, made['host'])} Do not create it here: an "
        f"empty folder is not the campaign. " + FIX.format(nick=nick, maker=made["nick"], root=root)
    )


def not_the_baseline(nick: str, real: str, seen: str, made: dict[str, str], root: str) -> str:
    """Why the folder `nick` sees by that name is not the one its maker prepared."""
    here = socket.gethostname()
    return (
        f"HOST BOUNDARY: @{nick} on host {here} sees another folder at {real} ({seen}) than "
        f"the build dir made by @{made['nick']} on host {made['host']} (baseline "
        f"{made['baseline'][:12]}).{_same_name(here, made['host'])} "
        + FIX.format(nick=nick, maker=made["nick"], root=root)
    )

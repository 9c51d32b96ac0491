"""Placement checked first: `bullpen build`'s pre-flight, before a ticket is posted.

A path means something only together with a host (seed 002 §8.2). Before the ticket
goes to the foreman, the command asks every nick the run will use (@sandbox,
@testdesigner, the grinder of the spec's language) a pre-flight, which each lurker
answers itself without running its step (agents/runtime/preflight.py, with the build
checks of agents/build/preflight.py). Only verified answers count. The run is refused,
with nothing posted to the foreman, when a nick

- does not answer (not running, cannot reach the hub, or not verified);
- runs on a society.toml other than this one (restart needed);
- lacks what its step needs on its host: the build root, a tool of the spec's
  language (`go`, `node`, `bwrap`, `chromium`, pytest), or, for @sandbox, REPO itself;
- does not see the build root @sandbox sees (another host, or another mount of it),
  so the build dir @sandbox prepares would not be visible to it: @testdesigner must
  share it; a grinder need not, its files travel through the object store
  (files_travel in agents/build/preflight.py, the one rule both checks apply).

Each refusal names the nick, its host, what is missing and the fix. The same view of
the build nicks' placement is what `bullpen trust check --live` flags (split_hosts).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from agents.build.pipeline import NICKS
from agents.build.preflight import files_travel, same_place
from agents.build.routing import LANGUAGES
from agents.runtime.ping import ask_each, config_drift, other_host_society
from agents.runtime.preflight import KEY
from room.errors import BullpenError

if TYPE_CHECKING:
    from agents.build.ticket import Ticket
    from agents.home import Home
    from room.client import RoomClient

__all__ = [
    "PREFLIGHT_S",
    "Placement",
    "PreflightFailed",
    "apart",
    "build_nicks",
    "preflight",
    "split_across",
    "travels",
]

PREFLIGHT_S = 30.0  # a lurker's first wake loads its step: seconds on a busy machine
MAKER = NICKS["prepare"]
DOCS = '`bullpen docs scaling`, "Placement checked first"'


class PreflightFailed(BullpenError):
    """A nick the run would use cannot do its step where it runs: nothing was posted."""


def travels(nick: str) -> bool:
    """Whether `nick`'s files travel (agents.build.preflight.files_travel): a nick that is
    not @sandbox or @testdesigner is a grinder."""
    roles = {nick: role for role, nick in NICKS.items()}
    return files_travel(roles.get(nick, "grind"))


def build_nicks(home: Home) -> list[str]:
    """Every nick a build may use that this society configures: @sandbox, @testdesigner
    and the grinders."""
    wanted = [*NICKS.values(), *dict.fromkeys(language.nick for language in LANGUAGES)]
    return [nick for nick in wanted if nick in home.society.nicks]


def _text(value: Any, limit: int = 400) -> str:
    """A field of an answer, as text for the terminal: it came through the room."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def where(answer: dict[str, Any]) -> str:
    return _text(answer.get("host") or "an unnamed host", 80)


@dataclass
class Placement:
    """The pre-flight's answers (nick -> data) and what refuses the run."""

    thread: str
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def apart(home: Home, answers: dict[str, dict[str, Any]], maker: str = MAKER) -> list[str]:
    """The nicks whose build root is not the folder `maker` sees and must be (travels),
    each said with both hosts; [] when `maker` did not answer."""
    made = answers.get(maker)
    if made is None or made.get("place") is None:
        return []  # (a maker with no build root has said so among its own problems)
    said = []
    for nick, answer in answers.items():
        if nick == maker or travels(nick) or "place" not in answer:
            continue
        if same_place(answer, made):
            continue
        root = _text(made.get("root"), 200)
        seen = "it has no such folder" if answer.get("place") is None else "another folder"
        same = (
            f" (both hosts are named {where(made)}: another filesystem of one name, a "
            "container or a mount namespace)"
            if where(made) == where(answer)
            else ""
        )
        said.append(
            f"@{nick} on host {where(answer)} does not see the build root {root} that "
            f"@{maker} sees on host {where(made)}: {seen}{same}. The build dir @{maker} "
            f"prepares there would not be visible to @{nick}. Fix: run @{nick} on "
            f"{where(made)}, or make {root} one folder shared by both hosts ({DOCS})"
        )
    return said


def _judge(home: Home, placement: Placement, nicks: Iterable[str], timeout: float) -> None:
    for nick in nicks:
        answer = placement.answers.get(nick)
        if answer is None:
            placement.problems.append(
                f"@{nick} did not answer the pre-flight within {timeout:g} s (no verified "
                "answer): its lurker is not running, cannot reach the hub, or is not "
                f"PRIVILEGED in trust.toml. Start it on the host it should run on (`bullpen "
                f"up`, or `systemctl --user start bullpen-lurker@{nick}`) and check it with "
                "`bullpen trust check --live`"
            )
            continue
        drift = config_drift(home, nick, {"data": answer})
        if drift is not None:
            placement.problems.append(f"@{nick} on host {where(answer)}: {drift}")
        note = other_host_society(home, nick, {"data": answer})
        if note is not None:
            placement.notes.append(note)
        if answer.get("checked") is False:
            placement.notes.append(
                f"@{nick} on host {where(answer)} runs no build step here (a command or an "
                "agent): what it can reach is not checked"
            )
        for problem in answer.get("problems") or []:
            if not isinstance(problem, dict):
                continue
            fix = _text(problem.get("fix") or "", 600)
            placement.problems.append(
                f"@{nick} on host {where(answer)}: {_text(problem.get('what'), 600)}"
                + (f". Fix: {fix}" if fix else "")
            )
    placement.problems += apart(home, placement.answers)


def seen(nick: str, answer: dict[str, Any]) -> str:
    """One line of what a nick said it sees, for the operator."""
    parts = [f"@{nick} on host {where(answer)}"]  # no "build " before the thread's line:
    if "root" in answer:  # scripts read the thread from the first "build <thread>" on stderr
        parts.append(f"root {_text(answer['root'], 200)}")
    if answer.get("found"):
        commit = answer.get("commit")
        state = f"at commit {_text(commit, 12)}" if commit else "not a git repository yet"
        parts.append(f"REPO {state}")
    elif "found" in answer:
        parts.append("REPO not found")
    tools = answer.get("tools")
    if isinstance(tools, dict):
        parts.append("tools " + ", ".join(_text(t, 40).rsplit("/", 1)[-1] for t in tools))
    if answer.get("fence"):
        parts.append(f"fence {_text(answer['fence'], 20)}")
    return ", ".join(parts)


async def preflight(
    home: Home, client: RoomClient, ticket: Ticket, err: TextIO, timeout: float = PREFLIGHT_S
) -> Placement:
    """Ask the run's nicks where they run and what they can reach; PreflightFailed (nothing
    posted) saying every problem, else the answers, each said in one line on `err`."""
    nicks = list(dict.fromkeys([*NICKS.values(), ticket.language.nick]))
    request = {"pipeline": "build", "language": ticket.language.name, "repo": ticket.repo}
    asked = ", ".join(f"@{nick}" for nick in nicks)
    print(
        f"pre-flight: asking {asked} where they run and what they can reach (up to "
        f"{timeout:g} s) …",
        file=err,
        flush=True,
    )

    def waiting(silent: list[str], seconds: float) -> None:
        names = ", ".join(f"@{nick}" for nick in silent)
        print(f"… pre-flight: still waiting on {names} ({seconds:.0f} s)", file=err, flush=True)

    asked_each = await ask_each(
        client, nicks, "pre-flight", {KEY: request}, timeout,
        label="preflight", verified_only=True, waiting=waiting,
    )  # fmt: skip
    if asked_each.unsent:  # the hub refused or could not be reached: its own error
        raise next(iter(asked_each.unsent.values()))
    placement = Placement(asked_each.thread)
    placement.answers = {
        nick: dict(line.get("data") or {}) for nick, line in asked_each.pongs.items()
    }
    _judge(home, placement, nicks, timeout)
    for note in placement.notes:
        print(f"pre-flight: {note}", file=err, flush=True)
    if placement.problems:
        listed = "\n".join(f"  - {problem}" for problem in placement.problems)
        raise PreflightFailed(
            f"pre-flight FAILED for the build of {ticket.spec_relative} "
            f"({ticket.language.name}, REPO {ticket.repo}), asked from host "
            f"{socket.gethostname()}:\n{listed}\nNothing was posted to the foreman; fix "
            "the above and run bullpen build again"
        )
    for nick in nicks:
        print(f"pre-flight ok: {seen(nick, placement.answers[nick])}", file=err, flush=True)
    return placement


async def split_across(home: Home, nicks: list[str], timeout: float) -> list[str]:
    """What `bullpen trust check --live` flags of the build nicks that answered its ping:
    each that does not share @sandbox's build root (split across hosts, no shared store)."""
    nicks = [nick for nick in build_nicks(home) if nick in nicks]
    if MAKER not in nicks or len(nicks) < 2:
        return []
    async with home.client(home.society.operator) as client:
        asked = await ask_each(
            client, nicks, "pre-flight", {KEY: {"pipeline": "build"}}, timeout,
            label="trust-check", verified_only=True,
        )  # fmt: skip
    answers = {nick: dict(line.get("data") or {}) for nick, line in asked.pongs.items()}
    return [f"build nicks split with no shared store: {said}" for said in apart(home, answers)]

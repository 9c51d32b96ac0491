"""Hosts fail apart: one cut off mid-run and healed, one killed mid-run.

Three hosts, each a NATS node of one R3 cluster, a hub, and lurkers: the foreman and most
expedition steps on host a, the score and excerpt steps on host b, the context step on
host c. Posters on every host post to their own hub the whole time.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.hosts.society import HostHome, Spread
from tests.support import REPO, Proc, wait_for

pytestmark = [pytest.mark.timeout(300), pytest.mark.long]

ON_HOST = {
    "a": ("foreman", "termgen", "retriever", "scotoma", "briefer"),
    "b": ("scorer", "excerpter"),
    "c": ("context",),
}
EXPEDITION_NICKS = ("context", "termgen", "retriever", "scorer", "scotoma", "excerpter", "briefer")
EXPEDITION = ("expedition", "--title", "Waiting Is Part of the Work", "--keyword", "patience")
POSTER = str(REPO / "tests" / "tools" / "poster.py")
POSTS = 40


def start_society(spread: Spread) -> None:
    spread.up(ON_HOST)


def start_posters(spread: Spread) -> dict[str, Proc]:
    """A poster on every host, each posting POSTS numbered lines to its own hub."""
    return {
        name: home.host.spawn(
            home.root.parent / f"poster-{name}.log",
            sys.executable,
            POSTER,
            home.strict_url,
            f"poster{name}",
            str(POSTS),
            "--every",
            "0.15",
        )
        for name, home in spread.homes.items()
    }


def acks(poster: Proc) -> dict[int, int]:
    """{k: seq} of the posts this poster's hub acknowledged."""
    found = {}
    for line in poster.output().splitlines():
        if line.startswith("ack "):
            _, k, seq = line.split()
            found[int(k)] = int(seq)
    return found


def asked(home: HostHome, nick: str) -> bool:
    return any(m["to"] == f"@{nick}" and m["type"] == "ask" for m in home.lines())


def same_room_everywhere(spread: Spread, acked: dict[str, dict[int, int]]) -> list[dict[str, Any]]:
    """Every hub's whole room, once all serve the same head; they must be line for line equal.
    (`acked`: what each host's poster was acknowledged, to say whether a differing line was.)"""
    homes = list(spread.homes.values())
    heads: dict[str, Any] = {}

    def converged() -> bool:
        for home in homes:
            if not home.healthy():
                return False
        for home in homes:
            heads[home.host.name] = home.lines()[-1]["seq"] if home.lines() else 0
        return len(set(heads.values())) == 1

    wait_for(converged, 90, f"every hub to serve the same room (heads {heads})")
    rooms = {home.host.name: home.lines() for home in homes}
    first = rooms["a"]
    for name, room in rooms.items():
        differ = [(x, y) for x, y in zip(first, room, strict=True) if x != y]
        assert not differ, (
            f"host {name}'s hub serves {len(differ)} lines other than host a's hub, the first "
            f"at seq {differ[0][0]['seq']}: {differ[0][1]['body']!r} instead of "
            f"{differ[0][0]['body']!r}; acknowledged posts: {acked}"
        )
    return first


def test_a_host_partitioned_mid_run_and_healed_loses_nothing_and_the_run_resumes(
    spread: Spread,
) -> None:
    """Host b (the scorer's) is cut off while the expedition runs and posters post on every
    host: hosts a and c go on posting, b's hub says it cannot store. Once healed, the run
    resumes and ends with its brief, or fails loud: the foreman reports the step that never
    answered and the command ends at its timeout (exit 3). Either way every acknowledged post
    is in every hub's room exactly once at the seq it was acknowledged with, the hubs serve
    the same room, no line is there twice, and the chain is whole.

    Failing loud is not a pass by default: in about one run in six here, @briefer, on host a,
    never received the foreman's ask made after the heal (its consumer's leader had moved off
    host b during the partition; docs/reliability.md), and the run ended that way."""
    foreman = spread.home("a").root / "society.toml"  # a step overdue after 40 s, not 130
    text = foreman.read_text()
    for nick in EXPEDITION_NICKS:
        text = text.replace(f"[nicks.{nick}]\n", f"[nicks.{nick}]\ntimeout_s = 30\n")
    foreman.write_text(text)
    start_society(spread)
    a, b = spread.home("a"), spread.home("b")
    run = a.spawn("expedition", *EXPEDITION, "--yes", "--wait-timeout", "120")
    posters = start_posters(spread)
    wait_for(lambda: asked(a, "context"), 60, "the run's first ask")
    b.host.partition()
    cut_at = len(acks(posters["a"])) + len(acks(posters["c"]))
    # Host b's hub cannot store (its node is alone); the rest of the cluster, a quorum,
    # goes on storing (after electing new leaders where b's node led: seconds, or tens of
    # seconds on a loaded machine, where a and c's hubs may stop and start meanwhile).
    wait_for(lambda: b.health_on_host() != 200, 60, "host b's hub to stop reporting ok")
    wait_for(
        lambda: len(acks(posters["a"])) + len(acks(posters["c"])) >= cut_at + 5,
        90,
        "hosts a and c to go on storing posts while b is cut off",
    )
    b.host.heal()

    wait_for(lambda: not run.alive(), 300, "the expedition to end")
    said = run.output()
    if run.proc.returncode == 0:
        assert "=== DIG REPORT ===" in said and "brief written" in said
    else:
        assert run.proc.returncode == 3, said
        assert re.search(r"^\[STEP TIMEOUT — @[a-z]+ did not reply in 40 s\]$", said, re.M), said
        print(f"the run failed loud after the heal: {said.splitlines()[-5:]}")
    wait_for(lambda: not any(p.alive() for p in posters.values()), 120, "the posters to end")

    acked = {name: acks(poster) for name, poster in posters.items()}
    room = same_room_everywhere(spread, acked)
    assert [line["seq"] for line in room] == list(range(1, len(room) + 1))
    assert len({line["id"] for line in room}) == len(room)
    posted = Counter(
        (line["from"], line["data"]["k"]) for line in room if line["from"].startswith("poster")
    )
    assert max(posted.values()) == 1, "a line is stored twice"
    by_seq = {line["seq"]: line for line in room}
    for name, acknowledged in acked.items():
        for k, seq in acknowledged.items():
            line = by_seq[seq]
            assert (line["from"], line["data"]) == (f"poster{name}", {"k": k}), (name, k, seq)
    replies = Counter(
        line.get("in_reply_to")
        for line in room
        if line["type"] == "reply" and line["from"] not in ("foreman", "operator")
    )
    assert max(replies.values()) == 1, "a step answered an ask twice"
    # The stream, as an operator would audit it: just after a heal the cluster may still be
    # electing a leader, and the audit then says to try again shortly (exit 1); they would.
    tries: list[subprocess.CompletedProcess[str]] = []

    def audited() -> bool:
        tries.append(spread.home("c").cli("audit", timeout=120))
        return tries[-1].returncode == 0 or "try again shortly" not in tries[-1].stderr

    wait_for(audited, 240, "an audit that is not told to try again")
    assert tries[-1].returncode == 0, tries[-1].stdout + tries[-1].stderr


def freeze(home: HostHome, nick: str) -> None:
    """Stop (SIGSTOP) the lurker of `nick` on this host, named `lurk <nick>` by `bullpen up`."""
    name = f"lurk {nick}"[:15]  # the kernel keeps 15 characters of a process's name
    for pid in home.host.pids():
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == name:
                os.kill(pid, signal.SIGSTOP)
                return
        except (FileNotFoundError, ProcessLookupError):
            continue  # a process that ended meanwhile
    raise AssertionError(f"no process named {name!r} on host {home.host.name}")


def test_a_host_killed_mid_run_is_reported_and_the_command_ends(spread: Spread) -> None:
    """Every process of host b (the scorer's) is killed once the scorer is asked: the
    foreman reports the step overdue, naming the nick, and `bullpen expedition` ends at its
    own timeout saying the run goes on in the room; the other hosts' hubs serve on.

    The scorer answers a score batch in milliseconds, faster than the test can kill its host
    after seeing the ask; so its lurker is stopped (SIGSTOP) before the run, and the host dies
    with that ask unanswered, as a host that dies while a step works on it."""
    for home in spread.homes.values():  # overdue 11 s after the ask, checked every second
        path = home.root / "society.toml"
        text = path.read_text().replace("[nicks.scorer]\n", "[nicks.scorer]\ntimeout_s = 1\n")
        path.write_text(text.replace("overdue_check_s = 5\n", "overdue_check_s = 1\n"))
    start_society(spread)
    a, c = spread.home("a"), spread.home("c")
    freeze(spread.home("b"), "scorer")
    run = a.spawn("expedition", *EXPEDITION, "--wait-timeout", "25")
    wait_for(lambda: asked(c, "scorer"), 60, "the foreman's ask to the scorer")
    killed_at = time.monotonic()
    spread.home("b").host.kill()

    overdue = "[STEP TIMEOUT — @scorer did not reply in 11 s]"
    wait_for(lambda: overdue in run.output(), 60, "the run to report the scorer overdue")
    wait_for(lambda: not run.alive(), 60, "the expedition command to end")
    took = time.monotonic() - killed_at
    assert run.proc.returncode == 3, run.output()
    assert "No Dig Report arrived within 25 s" in run.output()
    assert "goes on in the room" in run.output()
    assert took < 25, f"the command took {took:.0f} s after host b died"
    room = c.lines()
    scored = [m for m in room if m["from"] == "scorer"]
    assert not scored, f"the scorer was stopped and its host is dead, yet it posted: {scored}"
    assert [m for m in room if m["to"] == "@scorer" and m["type"] == "ask"]
    assert any(m["from"] == "foreman" and overdue in m["body"] for m in room)
    assert a.healthy() and c.healthy()

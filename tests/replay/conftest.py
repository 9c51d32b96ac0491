"""A recorded expedition for the replay tests: a real hub, foreman and lurkers, stopped at its
Dig Report, with an extra `cmd` seat (`alt`, a real program) to replay steps with."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import (
    EXPEDITION_LURKERS,
    REPO,
    Proc,
    Society,
    run_cli,
    set_seat,
    start_up,
    wait_for,
)

FAKES = REPO / "tests" / "fakes"
EXPEDITION = ("expedition", "--title", "Waiting Is Part of the Work", "--keyword", "patience")


def cmd_table(script: Path, env: dict[str, str]) -> str:
    lines = ['kind = "cmd"', f"command = {json.dumps([sys.executable, str(script)])}"]
    lines.append("env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }")
    lines.append("timeout_s = 30")
    return "\n".join(lines)


@dataclass
class RecordedRun:
    society: Society
    thread: str
    up: Proc
    calls: Path  # the alt seat's log: one JSON line per call


def tree(*roots: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file and link under `roots` -> its sha256 (a link: its target), `skip`ped folder
    names left out: what a replay must leave exactly as it was."""
    found: dict[str, str] = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if any(part in skip for part in path.relative_to(root).parts):
                continue
            if path.is_symlink():
                found[str(path)] = "link:" + str(path.readlink())
            elif path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[str(path)] = "folder"
    return found


def checkpointed(society: Society, timeout: float = 30.0) -> None:
    """Wait until the hub has signed a checkpoint of every line of the room: it signs about a
    second after the room grows (docs/audit.md), so a tree of the home taken sooner sees the
    hub's own checkpoint files change afterwards, whatever a replay did."""
    room = society.room
    note = room.with_name(room.name + ".tlog") / "checkpoint"
    plain = room.with_name(room.name + ".checkpoint")

    def covered() -> bool:
        lines = room.read_bytes().count(b"\n")
        try:
            signed = int(note.read_text().split("\n")[1])
            seq = int(json.loads(plain.read_text())["seq"])
        except (OSError, ValueError, IndexError, KeyError):
            return False
        return signed == seq == lines

    wait_for(covered, timeout, "the hub's checkpoint of every line")


def thread_from(output: str) -> str:
    match = re.search(r"\b(exp-[0-9a-f]+)\b", output)
    assert match, output
    return match.group(1)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordedRun]:
    """One recorded run per test module: every replay test leaves it as it was (they say so)."""
    tmp_path = tmp_path_factory.mktemp("recorded")
    society = Society(tmp_path / "home", demo=True)
    calls = tmp_path / "alt-calls.jsonl"
    set_seat(
        society.root,
        "alt",
        cmd_table(FAKES / "expedition_model.py", {"FAKE_MODEL_LOG": str(calls)}),
    )
    up = start_up(society, nicks=EXPEDITION_LURKERS)
    done = run_cli(society.root, *EXPEDITION, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    yield RecordedRun(society, thread_from(done.stdout + done.stderr), up, calls)
    up.stop()

"""`bullpen replay --fork`: a new run from a recorded step, to its Dig Report; the parent as it was."""

from __future__ import annotations

import json

from tests.replay.conftest import RecordedRun, thread_from
from tests.support import run_cli


def thread_lines(recorded: RecordedRun, thread: str) -> list[dict]:
    return [line for line in recorded.society.lines() if line.get("thread") == thread]


def test_a_fork_runs_to_its_dig_report_and_the_parent_is_unchanged(
    recorded: RecordedRun,
) -> None:
    """Forked at `terms` with the alt seat: the new thread's start records where it forked
    from and the answers it reused; the foreman asks only the steps after `terms`, the run
    stops at its own Dig Report, and not one line of the parent thread changed."""
    root, parent = recorded.society.root, recorded.thread
    before = thread_lines(recorded, parent)
    steps = json.loads(run_cli(root, "replay", parent, "--list", "--json").stdout)
    terms = next(row for row in steps if row["key"] == "terms")
    done = run_cli(
        root, "replay", parent, "--step", "terms", "--seat", "alt", "--fork", timeout=240
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "=== DIG REPORT ===" in done.stdout
    fork = thread_from(done.stderr.split("fork ", 1)[1])
    assert fork != parent
    lines = thread_lines(recorded, fork)
    start = lines[0]
    assert start["to"] == "@foreman" and start["from"] == "operator"
    assert start["data"]["forked_from"] == f"{parent}@{terms['ask_seq']}"
    assert [s["key"] for s in start["data"]["seeded"]] == ["context", "terms"]
    assert start["data"]["seeded"][1]["data"]["seat"] == "alt"
    asked = [line["to"] for line in lines if line["from"] == "foreman" and line["type"] == "ask"]
    assert "@context" not in asked and "@termgen" not in asked
    assert "@retriever" in asked and "@scotoma" in asked
    report = next(line for line in lines if (line["data"] or {}).get("key") == "dig-report")
    assert report["data"]["terms"] == start["data"]["seeded"][1]["data"]["terms"]
    assert thread_lines(recorded, parent) == before

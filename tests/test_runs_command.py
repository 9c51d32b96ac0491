"""`bullpen runs` and `bullpen runs show THREAD` as an operator runs them: a real hub, the
expedition's lurkers, the real command. The runs page of the web view renders the same words
(one function rebuilds a run from its thread for both)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.home import Home
from agents.web import pages
from agents.web.runs import build_runs
from tests.expedition.lurkers import expedition_society
from tests.support import Society, run_cli

EXPEDITION = ("expedition", "--title", "Waiting Is Part of the Work", "--keyword", "patience")
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def society(tmp_path: Path) -> Iterator[Society]:
    yield from expedition_society(tmp_path / "home")


def listed(society: Society, *args: str) -> list[dict]:
    result = run_cli(society.root, "runs", "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_runs_lists_where_each_run_waits_and_show_names_its_steps(society: Society) -> None:
    assert listed(society) == []
    empty = run_cli(society.root, "runs")
    assert empty.returncode == 0 and "no run in the room yet" in empty.stderr

    first = run_cli(society.root, *EXPEDITION, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    thread = re.search(r"\b(exp-[0-9a-f]+)\b", first.stderr).group(1)  # type: ignore[union-attr]

    (run,) = listed(society)
    assert run["thread"] == thread and run["kind"] == "expedition"
    assert run["title"] == "Waiting Is Part of the Work"
    assert run["state"] == "waiting" and run["waits_on"] == "operator"
    assert run["where"] == "at the gate: waiting on @operator"
    assert run["calls"] >= 3 and run["steps"] >= 6  # terms, scores, scotoma: the local seat
    assert run["tokens"] is None  # the local seat has no server to count them
    assert run["started"] <= run["last_activity"]

    table = run_cli(society.root, "runs")
    assert table.returncode == 0
    row = next(line for line in table.stdout.splitlines() if line.startswith(thread))
    assert "expedition" in row and "waiting" in row and "at the gate: waiting on @operator" in row

    shown = run_cli(society.root, "runs", "show", thread)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"^\s+1\. answered\s+@context", shown.stdout, re.M), shown.stdout
    assert f"bullpen expedition confirm {thread}" in shown.stdout
    assert f"bullpen cancel {thread}" in shown.stdout
    steps = json.loads(run_cli(society.root, "runs", "show", thread, "--json").stdout)["steps"]
    assert [s["nick"] for s in steps][:2] == ["context", "termgen"]

    typo = run_cli(society.root, "runs", "show", thread[:-1] + "z")
    assert typo.returncode == 2 and f"did you mean {thread}?" in typo.stderr

    # the web view's runs page says the same
    lines = society.lines()
    threads: dict[str, list[dict]] = {}
    for line in lines:
        threads.setdefault(line.get("thread") or "", []).append(line)
    html = pages.runs(build_runs(threads, Home(society.root).trust.trusted), "csrf")
    assert '<span class="where">at the gate: waiting on @operator</span>' in html

    assert listed(society, "--state", "done") == []
    assert [r["thread"] for r in listed(society, "--kind", "expedition")] == [thread]
    assert listed(society, "--kind", "build") == []

    cancelled = run_cli(society.root, "cancel", thread, "--json", timeout=60)
    assert cancelled.returncode == 0, cancelled.stderr
    said = json.loads(cancelled.stdout)
    assert said["thread"] == thread and said["confirmed"] is True
    assert said["report"].startswith("[RUN CANCELLED") and isinstance(said["seq"], int)
    (run,) = listed(society)
    assert run["state"] == "cancelled" and run["where"] == "cancelled" and run["waits_on"] is None
    assert [r["thread"] for r in listed(society, "--state", "cancelled")] == [thread]
    bad = run_cli(society.root, "runs", "--state", "stuck")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_audit_and_memory_namespaces_print_json(society: Society) -> None:
    """`audit --json` and `memory namespaces --json`: one JSON document on stdout each."""
    run_cli(society.root, "say", "@foreman", "hello")
    audited = run_cli(society.root, "audit", "--json")
    assert audited.returncode == 0, audited.stderr
    verdict = json.loads(audited.stdout)
    assert verdict["ok"] is True and verdict["lines"] >= 1 and verdict["bad_seq"] is None
    spaces = run_cli(society.root, "memory", "namespaces", "--json")
    assert spaces.returncode == 0, spaces.stderr
    rows = json.loads(spaces.stdout)
    assert {"ns", "count", "declared", "meaning"} <= set(rows[0])
    assert "/bullpen/lessons-learned" in [r["ns"] for r in rows]


def test_a_home_whose_room_never_started_has_no_runs_yet(tmp_path: Path) -> None:
    """A new home, nothing running: `bullpen runs` answers "no run yet" (exit 0), not "cannot
    read from the hub". Once the room held lines, a missing room with no hub is an error."""
    fresh = Society(tmp_path / "fresh")
    done = run_cli(fresh.root, "runs")
    assert done.returncode == 0, done.stderr
    assert "no run in the room yet (the room was never started" in done.stderr
    assert json.loads(run_cli(fresh.root, "runs", "--json").stdout) == []
    hub = fresh.start_hub()
    assert run_cli(fresh.root, "say", "@nobody", "hello").returncode == 0
    hub.stop()
    fresh.room.rename(fresh.room.with_name("moved.jsonl"))
    gone = run_cli(fresh.root, "runs")
    assert gone.returncode == 1 and "cannot read from the hub" in gone.stderr, gone.stderr

"""`bullpen backpass --bulk SEAT` in a home whose agents are handed lessons (the normal state).

The lurker wraps its judge so every prompt carries the nick's lessons; the backpass asks
that judge for the run's chosen seat. The wrapper once had no `seat` keyword, so every
trace failed with a TypeError as soon as one lesson existed (the operator-run test's home
has none): this home has a general lesson, saved through the room, before the run.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import Society, bullpen_argv, run_cli, wait_for

NICKS = ("librarian", "foreman", "tracelister", "analyst", "quotechecker", "ledgerkeeper")
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def taught(tmp_path: Path) -> Iterator[Society]:
    society = Society(tmp_path / "home", demo=True)
    with (society.root / "society.toml").open("a") as toml:
        toml.write('\n[seats.alt]\nkind = "local"\n')
    try:
        society.start_hub()
        lurkers = [society.spawn(f"lurk-{nick}", "lurk", nick) for nick in (*NICKS, "synthesizer")]
        wait_for(
            lambda: all("lurking" in p.output() or not p.alive() for p in lurkers),
            90,
            "the backpass lurkers to start",
        )
        assert all(p.alive() for p in lurkers), [p.output() for p in lurkers]
        saved = run_cli(
            society.root,
            "memory",
            "save",
            "--ns",
            "/bullpen/lessons-learned",
            "quote the trace exactly; a paraphrase is dropped",
        )
        assert saved.returncode == 0, saved.stderr

        def indexed() -> bool:
            found = run_cli(
                society.root,
                "memory",
                "recall",
                "--ns",
                "/bullpen/lessons-learned",
                "--json",
                "quote",
            )
            return found.returncode == 0 and bool(json.loads(found.stdout or "[]"))

        wait_for(indexed, 30, "the lesson to be indexed")
        yield society
    finally:
        society.stop_all()


def test_a_chosen_bulk_seat_answers_when_the_analyst_has_lessons(taught: Society) -> None:
    report = run_cli(taught.root, "backpass", "--report-only", "--bulk", "alt", timeout=240)
    assert "unexpected keyword argument" not in report.stdout + report.stderr, report.stdout
    assert report.returncode == 0, report.stdout + report.stderr
    assert re.search(r"^seat bulk\s+alt \(local\) ×\d+$", report.stdout, re.M), report.stdout
    # the analyst's replies name the lesson it was handed: the run really had lessons
    analyses = [
        line
        for line in taught.lines()
        if line.get("from") == "analyst" and line.get("type") == "reply"
    ]
    assert analyses and all((line.get("data") or {}).get("lessons") for line in analyses)


def test_one_backpass_at_a_time_and_the_second_is_told_which_run_holds_it(
    taught: Society,
) -> None:
    """Two `bullpen backpass` at once: the second posts nothing and names the first's run."""
    log = taught.root / "first-backpass.log"
    with log.open("wb") as out:
        first = subprocess.Popen(
            bullpen_argv(taught.root, "backpass", "--report-only"),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        said = wait_for(
            lambda: re.search(r"backpass run (\S+) asked of @foreman", log.read_text()), 60, "ask"
        )
        thread = said.group(1)

        def asks() -> int:  # the operator's asks of @foreman (pings and runs)
            return sum(
                1
                for line in taught.lines()
                if line.get("to") == "@foreman"
                and line.get("from") == "operator"
                and line.get("type") == "ask"
            )

        before = asks()
        second = run_cli(taught.root, "backpass", "--report-only", timeout=60)
        assert second.returncode == 75, second.stdout + second.stderr
        assert f"another backpass is running in this home: run {thread}" in second.stderr
        assert f"bullpen cancel {thread}" in second.stderr
        assert asks() == before  # the second posted nothing, not even a ping
        assert first.wait(240) == 0, log.read_text()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
    again = run_cli(taught.root, "backpass", "--report-only", "--json", timeout=240)
    assert again.returncode == 0, again.stdout + again.stderr  # the lock went with its holder
    result = json.loads(again.stdout)  # --json: the final result, one object
    assert result["exit"] == 0 and result["thread"].startswith("backpass-")
    assert result["data"]["final"] is True and isinstance(result["data"].get("funnel"), dict)
    assert "traces found" in result["report"]

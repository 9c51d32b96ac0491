"""`bullpen backpass` as an operator runs it, on a real hub, real lurkers and a real gateway:
every trace named in the funnel, the run's seats chosen and named, --report-only without git
steps, and a synthesis skipped (exit 1) when the gateway says its budget is spent."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.helpers import FakeBackend, GatewayHome, start_fake
from tests.support import Society, run_cli, wait_for

NICKS = ("foreman", "tracelister", "analyst", "quotechecker", "ledgerkeeper", "synthesizer")
SEATS = """
[seats.alt]
kind = "local"

[seats.metered]
kind = "openai"
via = "gateway"
model = "fake-model"
"""
pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Society, FakeBackend]]:
    """The demo home with a gateway whose synthesizer may make no call today."""
    society = Society(tmp_path / "home", demo=True)
    backend = start_fake()
    gateway = GatewayHome(society)
    gateway.configure(
        {"local": {"base_url": backend.base_url, "prefixes": ["fake"]}},
        callers={"synthesizer": {"calls_per_day": 0}},
    )
    with (society.root / "society.toml").open("a") as toml:
        toml.write(SEATS)
    gateway.token("synthesizer")
    try:
        society.start_hub()
        gateway.start()
        lurkers = [society.spawn(f"lurk-{nick}", "lurk", nick) for nick in NICKS]
        wait_for(
            lambda: all("lurking" in p.output() or not p.alive() for p in lurkers),
            90,
            "the backpass lurkers to start",
        )
        assert all(p.alive() for p in lurkers), [p.output() for p in lurkers]
        yield society, backend
    finally:
        society.stop_all()
        backend.stop()


def traces_of(society: Society) -> list[str]:
    return sorted(p.name for p in (society.root / "traces").rglob("*") if p.is_file())


def asks(society: Society) -> int:
    return sum(1 for line in society.lines() if line.get("to") == "@foreman")


def section(output: str, title: str) -> list[str]:
    """The indented lines under a funnel heading like `ANALYSED traces (5):`."""
    found = re.search(rf"^{title} traces \(\d+\)[^\n]*:\n((?:  .*\n?)*)", output, re.M)
    assert found, output
    return [line.strip() for line in found.group(1).splitlines()]


def test_seats_trace_names_report_only_and_the_budget(
    running: tuple[Society, FakeBackend],
) -> None:
    society, backend = running
    root = society.root

    for args, env, says in (
        (("--bulk", "nope"), {}, "--bulk: there is no seat named 'nope'"),
        ((), {"BULLPEN_SYNTHESIS_SEAT": "nah"}, "BULLPEN_SYNTHESIS_SEAT: there is no seat"),
    ):
        refused = run_cli(root, "backpass", *args, env=env)
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
        assert "metered" in refused.stderr and "alt" in refused.stderr  # the known seats
    assert asks(society) == 0  # refused before anything was posted

    # --report-only: the chosen bulk seat answers and is named; no git step is shown
    report = run_cli(root, "backpass", "--report-only", "--bulk", "alt", timeout=240)
    assert report.returncode == 0, report.stdout + report.stderr
    assert re.search(r"^chosen bulk\s+alt \(--bulk\)$", report.stdout, re.M), report.stdout
    assert re.search(r"^seat bulk\s+alt \(local\) ×\d+$", report.stdout, re.M), report.stdout
    assert "step 5/5 synthesis\n" in report.stderr and " and git" not in report.stderr
    assert "git -C" not in report.stdout and not re.search(r"^branch ", report.stdout, re.M)
    table_end = report.stdout.index("fallbacks")
    analysed = section(report.stdout, "ANALYSED")
    assert report.stdout.index("ANALYSED traces") > table_end  # after the table, not instead
    names = [line.split(":")[0] for line in analysed]
    assert sorted(Path(n).name for n in names) == traces_of(society)
    assert all(re.search(r": \d+ kept, \d+ dropped$", line) for line in analysed)

    # the synthesis seat through the gateway: its budget is spent, so no call, exit 1
    before = len(backend.requests())
    spent = run_cli(root, "backpass", env={"BULLPEN_SYNTHESIS_SEAT": "metered"}, timeout=240)
    assert spent.returncode == 1, spent.stdout + spent.stderr
    assert re.search(
        r"^synthesis\s+skipped: the gateway's budget for seat metered \(model fake-model\) is "
        r"spent: .*caller synthesizer.*calls_per_day",
        spent.stdout,
        re.M,
    ), spent.stdout
    assert "chosen synthesis    metered (BULLPEN_SYNTHESIS_SEAT)" in spent.stdout
    assert len(backend.requests()) == before  # the refused call never reached a model

    # the traces stayed pending: a normal run analyses them all, then the next finds them unchanged
    done = run_cli(root, "backpass", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    pr_body = (root / "runs").glob("*/PR_BODY.md")
    newest = max(pr_body, key=lambda p: p.stat().st_mtime).read_text()
    assert "ANALYSED traces" in newest and all(t in newest for t in traces_of(society))
    again = run_cli(root, "backpass", timeout=120)
    assert again.returncode == 0 and "nothing pending" in again.stdout
    assert "traces found" in again.stdout  # the table, then the list
    unchanged = section(again.stdout, "UNCHANGED")
    assert sorted(Path(n).name for n in unchanged) == traces_of(society)

"""The gateway's daily summary: posted by `bullpen gateway summary` as a verified line from
@gateway, its figures those of the ledger; and the timer `bullpen units install` renders for it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from tests.gateway.helpers import FakeBackend, GatewayHome
from tests.support import run_cli
from tests.test_up import exec_start, verify_output

StartFake = Callable[..., FakeBackend]


def test_the_summary_is_verified_and_matches_the_ledger(
    gw: GatewayHome, fake: StartFake, tmp_path: Path
) -> None:
    backend = fake(answer="four words of answer")
    gw.configure(
        {"local": {"base_url": backend.base_url, "prefixes": ["fake"]}},
        callers={"scorer": {"calls_per_day": 2}},
    )
    scorer, operator = gw.token("scorer"), gw.token("operator")
    gw.society.start_hub()
    gw.start()
    statuses = [gw.chat(scorer, "fake-model").status_code for _ in range(3)]
    statuses.append(gw.chat(operator, "fake-model").status_code)
    assert statuses == [200, 200, 429, 200]
    ledger = gw.ledger()
    day = datetime.now(UTC).date().isoformat()

    done = run_cli(gw.society.root, "gateway", "summary", "--day", day)
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [m for m in gw.society.lines() if m["from"] == "gateway"]
    assert line["verified"] is True and line["type"] == "chat"
    assert line["to"] == "@operator" and line["thread"] == f"gateway-summary-{day}"
    summary = line["data"]["summary"]
    assert summary["calls"] == len(ledger) == 4
    assert summary["failed"] == 1
    assert summary["tokens_in"] == sum(int(e.get("tokens_in") or 0) for e in ledger)
    assert summary["tokens_out"] == sum(int(e.get("tokens_out") or 0) for e in ledger) > 0
    assert summary["by_caller"]["scorer"]["calls"] == 3
    assert summary["by_caller"]["operator"]["calls"] == 1
    assert summary["by_backend"]["local"]["calls"] == 4
    assert {
        "budget": "caller:scorer:calls_per_day",
        "used": 3,
        "limit": 2,
        "spent": True,
    } in summary["budgets"]
    assert "caller:scorer:calls_per_day: 3 of 2 (SPENT)" in line["body"]
    assert f"gateway usage on {day} (UTC): 4 calls (1 failed)" in line["body"]
    assert scorer not in line["body"] and scorer not in str(line["data"])

    other = run_cli(gw.society.root, "gateway", "summary", "--day", "2001-01-01", "--dry-run")
    assert other.returncode == 0 and "0 calls" in other.stdout  # another day: nothing
    assert len([m for m in gw.society.lines() if m["from"] == "gateway"]) == 1

    target = tmp_path / "units"
    units = run_cli(gw.society.root, "units", "install", "--dir", str(target))
    assert units.returncode == 0, units.stderr
    service = (target / "bullpen-gateway-summary.service").read_text()
    assert exec_start(service).endswith(f" --home {gw.society.root} gateway summary")
    assert "OnCalendar=*-*-* 00:05:00 UTC" in (target / "bullpen-gateway-summary.timer").read_text()
    assert "bullpen-gateway-summary.timer" in units.stdout  # enabled with the rest
    assert verify_output(target, tmp_path) == ""


def test_a_day_with_a_budget_set_but_no_callers_says_the_budget(
    gw: GatewayHome, fake: StartFake
) -> None:
    """[gateway.budget] binds every caller; on a day nobody called, the summary still lists it
    (0 used), rather than "no budget is set"."""
    backend = fake(answer="ok")
    gw.configure({"local": {"base_url": backend.base_url, "prefixes": ["fake"]}})
    path = gw.society.root / "society.toml"
    path.write_text(path.read_text() + "\n[gateway.budget]\ncalls_per_day = 150\n")
    done = run_cli(gw.society.root, "gateway", "summary", "--day", "2001-01-01", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "caller:*:calls_per_day: 0 of 150 (ok)" in done.stdout
    assert "no budget is set" not in done.stdout

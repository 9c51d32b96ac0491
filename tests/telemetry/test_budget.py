"""`--budget` on a run command: a real expedition (`bullpen up`, the gateway, a fake model
program behind it) started with `--budget calls=2` stops at its third model call, saying so
in the room; the spent budget shows in `bullpen runs` and on the society page."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from room.traceids import run_traceparent
from tests.support import Society, free_port, run_cli, wait_for
from tests.telemetry.runs import Recorded, record_expedition
from tests.web.browser import session_client

LISTENING = '"event": "web listening"'  # its own log: the port is its, not another's


def society_page(society: Society, tries: int = 3) -> str:
    """The society page from a `bullpen web` of its own on a free port (again on another
    when a program took the port meanwhile: the machine is shared)."""
    toml = society.root / "society.toml"
    base = toml.read_text()
    for _ in range(tries):
        port = free_port()
        toml.write_text(base + f'\n[web]\nlisten = "127.0.0.1:{port}"\n')
        web = society.spawn("web", "web")
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for(lambda w=web: not w.alive() or LISTENING in w.output(), 60, "bullpen web")
            if web.alive():
                with session_client(society.root) as client:
                    return client.get(f"{url}/society").text
            assert "already in use" in web.output(), web.output()
        finally:
            web.stop()
            toml.write_text(base)
    raise AssertionError(f"bullpen web found no free port in {tries} tries")


@pytest.fixture(scope="module")
def spent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    run = record_expedition(
        tmp_path_factory.mktemp("budget") / "home",
        args=("--yes", "--budget", "calls=2"),
        exits=(1,),  # the run failed: its budget ran out
    )
    yield run
    run.stop()


def test_a_run_budget_stops_the_run_mid_way_with_a_line_naming_it(spent: Recorded) -> None:
    """The demo expedition makes at least three model calls; with --budget calls=2 the third
    (of the scorer's batches racing) is refused at the gateway (nothing sent on), the step's reply fails naming the run's
    budget, and the foreman ends the run there: failed, no brief."""
    thread = spent.thread
    lines = [m for m in spent.society.lines() if m.get("thread") == thread]

    def ledger_of_run() -> list[dict]:
        return [e for e in spent.ledger() if e.get("thread") == thread]

    # The scorer's batches call at once: which of them is the third is the race's. The
    # refused one fails its step at once and the foreman ends the run, while the other may
    # still be answered; the gateway writes a call's ledger line when the call ends.
    wait_for(lambda: len(ledger_of_run()) >= 3, 30, "the run's three calls in the ledger")
    ledger = ledger_of_run()
    assert sorted(e["status"] for e in ledger) == [200, 200, 429], ledger
    assert [e["flags"] for e in ledger if e["status"] == 429] == [["OVER_BUDGET"]]
    assert all(e["run_budget"] == {"calls": 2} for e in ledger)
    refused = [
        m
        for m in lines
        if m["type"] == "reply" and (m.get("data") or {}).get("failed") and m["from"] != "foreman"
    ]
    assert len(refused) == 1, refused
    body = refused[0]["body"]
    assert "HTTP 429" in body and f"run {thread}" in body and "--budget" in body, body
    finals = [m for m in lines if m["from"] == "foreman" and (m.get("data") or {}).get("final")]
    assert len(finals) == 1 and finals[0]["to"] == "@operator"
    assert "FAILED" in finals[0]["body"] and finals[0]["seq"] > refused[0]["seq"]
    assert not any(m["to"] == "@briefer" for m in lines)  # stopped mid-way: no later step
    (ticket,) = [m for m in lines if m["to"] == "@foreman" and m["type"] == "ask"]
    assert ticket["data"]["budget"] == {"calls": 2}
    assert ticket["data"]["traceparent"] == run_traceparent(thread)
    asks = [m for m in lines if m["from"] == "foreman" and m["type"] == "ask"]
    assert asks and all(m["data"]["budget"] == {"calls": 2} for m in asks)
    assert all(m["data"]["traceparent"] == run_traceparent(thread) for m in asks)


def test_the_spent_run_budget_shows_in_bullpen_runs_and_on_the_society_page(
    spent: Recorded,
) -> None:
    """Its two calls of two are 100% of the run's budget: `bullpen runs` lists it under
    "budgets near their limit", and the society page names it."""
    done = run_cli(spent.society.root, "runs", timeout=60)
    assert done.returncode == 0, done.stderr
    near = done.stdout.split("budgets near their limit:", 1)
    assert len(near) == 2, done.stdout
    assert re.search(rf"run:{spent.thread}:calls 2 of 2 \(100%\)", near[1]), done.stdout
    assert spent.thread in near[0]  # the run itself is in the table above
    page = society_page(spent.society)
    assert f"run:{spent.thread}:calls" in page and "100%" in page


def test_a_budget_that_is_not_one_is_exit_2_and_posts_nothing(spent: Recorded) -> None:
    before = len(spent.society.lines())
    for bad in ("tokens=lots", "calls=-1", "wishes=3", "cost=nan", ""):
        done = run_cli(spent.society.root, "expedition", "--title", "t", "--keyword", "k",
                       "--budget", bad)  # fmt: skip
        assert done.returncode == 2, (bad, done.stderr)
        assert "--budget" in done.stderr
    assert len(spent.society.lines()) == before

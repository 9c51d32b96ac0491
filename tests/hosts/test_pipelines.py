"""An expedition and a backpass whose steps run on two hosts finish as they do on one.

Host a runs the foreman and most steps; host b runs the steps of the score and excerpt
(expedition) and of the analysis and quote check (backpass), each host with its own
home. The knowledge base and the traces are read where the step that reads them runs:
each host's home has its own copy (the demo's, laid down by `bullpen init --demo`), at
the same path, since the foreman's asks name absolute paths (without the copy, host b's
excerpter could not read the files host a's retriever listed). The backpass's steps also
hand each other files in its run folder: see the backpass test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.hosts.society import HostHome, Spread

pytestmark = pytest.mark.timeout(300)

EXPEDITION_A = ("foreman", "context", "termgen", "retriever", "scotoma", "briefer")
EXPEDITION_B = ("scorer", "excerpter")
BACKPASS_A = ("foreman", "tracelister", "ledgerkeeper", "synthesizer")
BACKPASS_B = ("analyst", "quotechecker")
EXPEDITION = ("expedition", "--title", "Waiting Is Part of the Work", "--keyword", "patience")
DEEP_CUT = "- voice-logs/2024-04-lime-mortar.md (row_2)"  # the demo's, as on one host


def started(spread: Spread, on_a: tuple[str, ...], on_b: tuple[str, ...]) -> None:
    spread.up({"a": on_a, "b": on_b})
    spread.home("c").hub()


def handled_by(home: HostHome, nick: str) -> bool:
    """Whether `nick`'s lurker on this host handled an ask (its own log says so)."""
    log = home.root / "logs" / f"{nick}.log"
    return log.exists() and '"handled"' in log.read_text(errors="replace")


def replies_from(home: HostHome, thread: str) -> set[str]:
    return {m["from"] for m in home.lines() if m.get("thread") == thread and m["type"] == "reply"}


def thread_of(output: str, prefix: str) -> str:
    match = re.search(rf"\b({prefix}-[0-9a-f]+)\b", output)
    assert match, output
    return match.group(1)


def test_an_expedition_with_steps_on_two_hosts_writes_its_brief(spread: Spread) -> None:
    started(spread, EXPEDITION_A, EXPEDITION_B)
    a, b = spread.home("a"), spread.home("b")
    done = a.cli(*EXPEDITION, "--yes", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "=== DIG REPORT ===" in done.stdout
    deep = done.stdout.split("Deep cuts:")[1].split("Voice anchors:")[0]
    assert DEEP_CUT in deep, done.stdout
    briefs = sorted((a.root / "briefs").glob("*.md"))
    assert len(briefs) == 1 and "MISSING" not in briefs[0].read_text()
    assert list((b.root / "briefs").glob("*.md")) == []  # written where @briefer runs
    thread = thread_of(done.stdout + done.stderr, "exp")
    assert {"scorer", "excerpter", "termgen", "briefer"} <= replies_from(spread.home("c"), thread)
    for nick in EXPEDITION_B:
        assert handled_by(b, nick) and not (a.root / "logs" / f"{nick}.log").exists()


def share_run_folders(spread: Spread) -> Path:
    """One folder for the backpass's run artifacts, at one path on every host (a network
    share, in life): each step hands the next its output as a file in it."""
    common = spread.net.root / "shared-runs"
    common.mkdir()
    for home in spread.homes.values():
        path = home.root / "society.toml"
        text = path.read_text().replace("\n[backpass]\n", f'\n[backpass]\nruns = "{common}"\n', 1)
        path.write_text(text + f'\n[roots]\nruns = "{common}"\n')
    return common


def test_a_backpass_with_steps_on_two_hosts_analyses_every_trace(spread: Spread) -> None:
    """The backpass's steps hand each other files under its runs folder (runs/<thread>/…):
    that folder is shared by the hosts here. Without it, host a's ledger step cannot read the
    items.json host b's quote check wrote, and the run fails at step 4 saying so (`cannot
    read the run artifact …`); those files are not yet carried through the room's engine."""
    common = share_run_folders(spread)
    started(spread, BACKPASS_A, BACKPASS_B)
    a, b = spread.home("a"), spread.home("b")
    done = a.cli("backpass", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    counts = dict(re.findall(r"^(traces found|analysed|failed)\s+(\d+)$", done.stdout, re.M))
    assert counts["traces found"] == counts["analysed"] != "0", done.stdout
    assert counts["failed"] == "0", done.stdout
    for nick in BACKPASS_B:
        assert handled_by(b, nick), nick
    assert list(common.glob("backpass-*/items.json"))  # written on b, read on a
    assert "nothing pending" in a.cli("backpass", timeout=120).stdout

"""An expedition and a backpass whose steps run on two hosts finish as they do on one.

Host a runs the foreman and most steps; host b runs the steps of the score and excerpt
(expedition) and of the analysis and quote check (backpass), each host with its own
home. The traces are read where the step that reads them runs: each host's home has its
own copy (the demo's, laid down by `bullpen init --demo`), at the same path, since the
foreman's asks name absolute paths. The knowledge base need not be copied: host a's
retriever puts each candidate file in the room's object store, and host b's excerpter,
with no knowledge base of its own, fetches it by its SHA-256 (see the expedition tests).
The backpass's steps hand each other files through the store the same way.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from typing import Any

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


def replies_of(home: HostHome, thread: str, nick: str) -> list[dict[str, Any]]:
    return [
        m
        for m in home.lines()
        if m.get("thread") == thread and m["type"] == "reply" and m["from"] == nick
    ]


def test_an_expedition_whose_excerpter_has_no_knowledge_base_fetches_its_files(
    spread: Spread,
) -> None:
    """The knowledge base is on host a only; host b's excerpter fetches each file it cuts
    from the store by the SHA-256 host a's retriever named, and cuts exactly those bytes."""
    a, b = spread.home("a"), spread.home("b")
    shutil.rmtree(b.root / "kb")
    started(spread, EXPEDITION_A, EXPEDITION_B)
    done = a.cli(*EXPEDITION, "--yes", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "=== DIG REPORT ===" in done.stdout
    deep = done.stdout.split("Deep cuts:")[1].split("Voice anchors:")[0]
    assert DEEP_CUT in deep, done.stdout
    (brief,) = sorted((a.root / "briefs").glob("*.md"))
    assert "MISSING" not in brief.read_text()
    thread = thread_of(done.stdout + done.stderr, "exp")
    (cut,) = replies_of(spread.home("c"), thread, "excerpter")
    assert handled_by(b, "excerpter") and not (b.root / "kb").exists()
    data = cut["data"]
    assert data["fetched"] and data["excerpts"], data
    for entry in data["excerpts"]:  # the bytes host b used are host a's file, to the byte
        source = (a.root / "kb" / entry["file"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(source).hexdigest(), entry["file"]
        assert entry["text"].split("\n\n")[0] in source.decode("utf-8")
        assert entry["file"] in data["fetched"]


def test_an_expedition_whose_files_cannot_be_fetched_fails_naming_the_step_and_host(
    spread: Spread,
) -> None:
    """Host a's retriever stores the files in another bucket than host b reads (a
    misconfigured `[objects] bucket`): the excerpter on b finds no such object, and the
    run fails at step 5 saying which file, which step, which host."""
    a, b = spread.home("a"), spread.home("b")
    shutil.rmtree(b.root / "kb")
    with (a.root / "society.toml").open("a") as toml:
        toml.write('\n[objects]\nbucket = "host-a-only"\n')
    started(spread, EXPEDITION_A, EXPEDITION_B)
    done = a.cli(*EXPEDITION, "--yes", timeout=240)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0, said
    assert "STEP_5 FAILED" in said, said
    assert "the knowledge-base file" in said and "no such object" in said, said
    assert "is not on host b where @excerpter runs (step excerpts)" in said, said
    assert list((a.root / "briefs").glob("*.md")) == []


def test_a_backpass_with_steps_on_two_hosts_analyses_every_trace(spread: Spread) -> None:
    """The backpass's steps hand each other files under their own run folder
    (runs/<thread>/…), and each also goes into the room's object store, named by SHA-256 in
    the reply: host a's ledger step fetches the items.json host b's quote check wrote (no
    folder is shared), checks its hash, and the run finishes as on one host."""
    started(spread, BACKPASS_A, BACKPASS_B)
    a, b = spread.home("a"), spread.home("b")
    done = a.cli("backpass", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    counts = dict(re.findall(r"^(traces found|analysed|failed)\s+(\d+)$", done.stdout, re.M))
    assert counts["traces found"] == counts["analysed"] != "0", done.stdout
    assert counts["failed"] == "0", done.stdout
    for nick in BACKPASS_B:
        assert handled_by(b, nick), nick
    written = list(b.root.rglob("backpass-*/items.json"))  # by b's quote check
    fetched = list(a.root.rglob("backpass-*/items.json"))  # by a's ledger step, from the store
    assert len(written) == len(fetched) == 1, (written, fetched)
    assert written[0].read_bytes() == fetched[0].read_bytes()
    assert "nothing pending" in a.cli("backpass", timeout=120).stdout

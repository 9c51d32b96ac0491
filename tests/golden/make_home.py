"""Make the golden home: a home written by this bullpen that every later version's tests
open (tests/golden/test_golden_home.py). One command remakes it:

    PYTHONPATH=. python -m tests.golden.make_home            # writes tests/golden/home-<version>

What it holds, made by real processes on the built-in seat: `bullpen demo`'s runs (an
expedition confirmed to its brief, a backpass, a build with no code seat, a memory save
and recall), then a second expedition whose termgen answer came through the gateway with
`record = true` (a gateway ledger line and a recording), a nick promoted to its own Ed25519
key with a signed reply, and a witness's cosignature of the final checkpoint.

What it leaves out to stay small (well under 1 MB): logs, the demo's knowledge base but
its index (which a replayed termgen step reads), memory repositories, traces and backpass run folders (inputs, or git repositories, which a
git checkout cannot hold), and the SQLite write-ahead files (checkpointed first). Every
secret in it (secrets/) is made for it and guards nothing: the home is test data.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from agents.gateway.tokens import issue
from room.version import __version__
from tests.fakes.expedition_model import TERMS
from tests.fakes.fake_openai import FakeOpenAI
from tests.gateway.helpers import gateway_section
from tests.replay.conftest import EXPEDITION, thread_from
from tests.support import (
    EXPEDITION_LURKERS,
    REPO,
    Society,
    add_nick,
    free_port,
    run_cli,
    set_hub,
    set_seat,
    start_up,
    wait_for,
)

HERE = Path(__file__).resolve().parent
TARGET = HERE / f"home-{__version__}"
ORIGIN = Path(tempfile.gettempdir()) / f"bullpen-golden-{__version__}" / "home"
WORKER = "worker"  # the nick promoted to its own key
DROPPED = ("logs", "memory", "traces", "runs", "test-logs")
KB_KEPT = "corpus_index.md"  # what a replayed termgen step reads of the knowledge base


class Kept(Society):
    """A Society over a home that exists (the demo's), on two fresh ports."""

    def __init__(self, root: Path) -> None:  # no init_home: the demo made it
        self.strict_port, self.relaxed_port = free_port(), free_port()
        set_hub(
            root,
            strict=f"127.0.0.1:{self.strict_port}",
            relaxed=f"127.0.0.1:{self.relaxed_port}",
            checkpoint_interval_s=1,  # the witness cosigns a checkpoint of every line
        )
        self.root = root
        self.procs = []


def ok(done: subprocess.CompletedProcess[str], what: str) -> str:
    if done.returncode != 0:
        raise SystemExit(
            f"make_home: {what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    print(f"make_home: {what}: ok", file=sys.stderr)
    return done.stdout + done.stderr


def make(root: Path) -> dict[str, str]:
    """Build the home at `root`; what the tests look for in it (threads, nicks, keys)."""
    ok(
        subprocess.run(
            [sys.executable, "-m", "agents.cli", "--home", str(root), "demo"],
            capture_output=True,
            text=True,
            timeout=600,
        ),
        "bullpen demo",
    )
    society = Kept(root)
    facts: dict[str, str] = {"version": __version__}
    with FakeOpenAI({"termgen": json.dumps({"terms": TERMS})}) as backend:
        section = gateway_section(
            free_port(),
            {"fake": {"base_url": backend.base_url, "prefixes": ["test"], "check": False}},
            record=True,
        )
        society_file = root / "society.toml"
        society_file.write_text(society_file.read_text() + section)
        set_seat(root, "termgen", 'kind = "openai"\nvia = "gateway"\nmodel = "test-model"')
        issue(society.home, "termgen")
        add_nick(root, WORKER, privileged=False, handler="agents.examples:echo")
        # The hub keeps cosignatures only from the witnesses its operator names (docs/audit.md).
        witness_key = ok(run_cli(root, "witness", "--show-key"), "the witness key").split()[0]
        set_hub(root, witnesses=[witness_key])
        # A replay wakes a step without lessons, so the recorded run must have had none for
        # its gateway request to be the one the replay makes (docs/replay.md).
        os.environ["BULLPEN_LESSONS"] = "off"
        up = start_up(society, ready=True, nicks=(*EXPEDITION_LURKERS, WORKER, "librarian"))
        try:
            ok(run_cli(root, "memory", "save", "golden homes keep formats honest",
                       "--ns", "/bullpen/ops", timeout=60), "a memory save")  # fmt: skip
            said = ok(run_cli(root, *EXPEDITION, timeout=300), "an expedition through the gateway")
            facts["gateway_thread"] = thread_from(said)
            ok(run_cli(root, "trust", "promote", WORKER, "--key", timeout=180), "promote --key")
            ok(
                run_cli(root, "say", f"@{WORKER}", "signed, please", "--type", "ask"),
                "an ask of the promoted nick",
            )
            # The witness cosigns the last checkpoint: every answer must be in first.
            wait_for(lambda: answered(society), 60, "the promoted nick's signed reply")
            wait_for(lambda: signed_size(root) == len(society.lines()), 30, "a checkpoint of all")
            ok(run_cli(root, "witness", "--once", timeout=60), "a witness cosignature")
            facts["witness_key"] = witness_key
        finally:
            up.stop()
    if not (root / "room" / "room.jsonl.tlog" / "cosignatures").exists():
        raise SystemExit("make_home: the hub signed a newer checkpoint after the witness cosigned")
    return facts


def signed_size(root: Path) -> int:
    """The size of the hub's latest signed checkpoint (its note's second line)."""
    note = root / "room" / "room.jsonl.tlog" / "checkpoint"
    return int(note.read_text().split("\n")[1]) if note.exists() else 0


def answered(society: Society) -> bool:
    """The promoted nick's signed reply and the librarian's answer to the save are in."""
    lines = society.lines()
    signed = any(m["from"] == WORKER and m.get("sig") and m["verified"] for m in lines)
    saved = any(
        m["from"] == "librarian" and (m.get("data") or {}).get("ns") == "/bullpen/ops"
        for m in lines
    )
    return signed and saved


def trim(root: Path) -> None:
    """What the golden home need not carry (module docstring), and the SQLite WAL files."""
    for name in DROPPED:
        shutil.rmtree(root / name, ignore_errors=True)
    for entry in (root / "kb").iterdir():
        if entry.name != KB_KEPT:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    for db in root.rglob("*.sqlite"):
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode = DELETE")
            conn.execute("VACUUM")
    for stale in [*root.rglob("*.sqlite-wal"), *root.rglob("*.sqlite-shm"), *root.rglob("*.lock")]:
        stale.unlink()


def main() -> int:
    # A fixed place, so the paths the room's lines name (the knowledge base an ask gives)
    # are the same each time the home is made; the tests declare it as a root.
    scratch = ORIGIN.parent
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(mode=0o700, parents=True)
    try:
        facts = make(ORIGIN)
        facts["origin"] = str(ORIGIN)
        trim(ORIGIN)
        (ORIGIN / "golden.json").write_text(json.dumps(facts, indent=2) + "\n")
        if TARGET.exists():
            shutil.rmtree(TARGET)
        shutil.copytree(ORIGIN, TARGET, symlinks=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    size = sum(p.stat().st_size for p in TARGET.rglob("*") if p.is_file())
    print(f"make_home: wrote {TARGET.relative_to(REPO)} ({size / 1024:.0f} KiB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

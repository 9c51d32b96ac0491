"""The golden home (tests/golden/home-0.1.0, made by make_home.py): a home written by
bullpen 0.1.0, which this bullpen and every later one must still read. Its audit passes,
its proofs and the witness's cosignature verify, its memory recalls, its recorded run
replays offline from the gateway's recording, and `bullpen eval` runs on its config.

Each test opens a private copy: git keeps no file modes, so the copy is made private
(0700 folders, 0600 files) as restoring a home from a backup would; and the committed
home is never written.
"""

from __future__ import annotations

import fcntl
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents import formats
from tests.support import run_cli

GOLDEN = Path(__file__).resolve().parent / "home-0.1.0"


def private_copy(home: Path) -> Path:
    shutil.copytree(GOLDEN, home)
    for path in [home, *home.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    return home


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    return private_copy(tmp_path / "home")


def facts() -> dict[str, Any]:
    return json.loads((GOLDEN / "golden.json").read_text())


def lines(home: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (home / "room" / "room.jsonl").read_bytes().splitlines()]


def test_it_is_small_and_names_the_version_that_made_it() -> None:
    size = sum(p.stat().st_size for p in GOLDEN.rglob("*") if p.is_file())
    assert size < 512 * 1024, size
    record = formats.read_record(GOLDEN)
    assert record.present and record.made_by == facts()["version"] == "0.1.0"
    assert not formats.too_new(record)


def test_upgrade_brings_it_to_this_version_and_never_touches_the_room(golden: Path) -> None:
    room = golden / "room" / "room.jsonl"
    before = room.read_bytes()
    done = run_cli(golden, "upgrade")
    assert done.returncode == 0, done.stderr
    assert room.read_bytes() == before
    assert formats.read_record(golden).formats == formats.current()


def test_audit_passes_with_the_promoted_nicks_signatures(golden: Path) -> None:
    """The chain, the seqs, the signed checkpoint, and the keyed nick's Ed25519 signatures
    checked against trust.toml's public key."""
    every = lines(golden)
    signed = [m for m in every if m.get("sig") and m["from"] == "worker"]
    assert signed and all(m["verified"] for m in signed)
    done = run_cli(golden, "audit")
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert f"ok: {len(every)} lines" in said
    assert f"signatures: {len(signed)} verified against trust.toml's public keys" in said


def served_checkpoint(home: Path) -> Path:
    """The checkpoint as the hub served it: its signed note and the witness's cosignature
    (kept beside it in cosignatures, for that very note)."""
    tlog = home / "room" / "room.jsonl.tlog"
    note = (tlog / "checkpoint").read_text()
    kept = json.loads((tlog / "cosignatures").read_text())
    assert note.startswith(kept["text"]) and kept["lines"]
    served = home / "served-checkpoint"
    served.write_text(note + "".join(kept["lines"]))
    return served


def test_proofs_and_the_witness_cosignature_verify(golden: Path) -> None:
    room = golden / "room" / "room.jsonl"
    served = served_checkpoint(golden)
    witness = facts()["witness_key"]
    every = lines(golden)
    signed = next(m["seq"] for m in every if m.get("sig") and m["from"] == "worker")
    for seq in (1, signed, every[-1]["seq"]):
        done = run_cli(
            golden, "verify", "--room", str(room), "--checkpoint", str(served),
            "--seq", str(seq), "--witness", witness,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"line {seq} is in the signed tree of {len(every)} lines" in done.stdout
    bundle = golden / "bundle.json"
    done = run_cli(golden, "verify", "--room", str(room), "--checkpoint", str(served),
                   "--export", str(signed), "--out", str(bundle))  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = run_cli(golden, "verify", str(bundle), "--witness", witness)
    assert done.returncode == 0, done.stdout + done.stderr
    # and the check can fail: a cosignature of another note does not verify
    other = served.read_text().replace(f"\n{len(every)}\n", f"\n{len(every) - 1}\n", 1)
    served.write_text(other)
    done = run_cli(golden, "verify", "--room", str(room), "--checkpoint", str(served),
                   "--seq", "1", "--witness", witness)  # fmt: skip
    assert done.returncode != 0


def test_memory_recall_answers(golden: Path) -> None:
    done = run_cli(golden, "memory", "recall", "golden", "--json")
    assert done.returncode == 0, done.stderr
    assert "golden homes keep formats honest" in done.stdout


@pytest.fixture
def at_origin() -> Iterator[Path]:
    """A private copy at the very place the golden home was made: the room's asks name its
    paths (the knowledge base an expedition was given), as a restored home's do. One test
    at a time on this machine holds it (a lock beside it), and it is removed after."""
    origin = Path(facts()["origin"])
    origin.parent.mkdir(mode=0o700, exist_ok=True)
    with open(origin.parent.with_name(origin.parent.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            shutil.rmtree(origin, ignore_errors=True)
            yield private_copy(origin)
        finally:
            shutil.rmtree(origin.parent, ignore_errors=True)


def test_a_recorded_step_replays_offline_from_the_recording(at_origin: Path) -> None:
    """termgen answered through the gateway with record = true; its replay is answered
    from the recording (the backend it asked is long gone, so asking it would fail)."""
    thread = facts()["gateway_thread"]
    listed = run_cli(at_origin, "replay", thread, "--list")
    assert listed.returncode == 0, listed.stderr
    assert "terms" in listed.stdout and "termgen" in listed.stdout
    done = run_cli(at_origin, "replay", thread, "--step", "terms", "--offline", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["gates"]["replayed"]["pass"] is True, result["replayed"]["body"]
    assert result["replayed"]["data"]["terms"] == result["recorded"]["data"]["terms"]
    assert result["replayed"]["data"]["judgments"][-1]["seat_kind"] == "openai"


def test_eval_runs_on_its_config(golden: Path) -> None:
    done = run_cli(golden, "eval", "example", "--seat", "score", "--json", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (board,) = json.loads(done.stdout)["seats"]
    # the two run cases and every step case the seat can answer (the build's are skipped:
    # the built-in seat writes no code)
    assert board["seat"] == "score" and board["passed"] == board["cases"] - board["skipped"]
    assert board["passed"] >= 22 and board["failed_gates"] == {}

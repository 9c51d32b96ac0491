"""`bullpen witness`: cosigns a hub's checkpoints as they grow, and refuses a forked one.

A real hub and real witness processes (`--once` per poll). The witness
cosigns the first checkpoint it sees and each later one whose consistency
proof verifies; the hub serves the cosignature and `bullpen verify --witness`
requires it. Then a second hub with the same key and origin (a hub showing
another history) is shown to the same witness: two roots for one size are
refused, its state is unchanged, and the refusal is reported in the room.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import Society, run_cli, set_hub, wait_for
from tests.tlog.helpers import checkpoint, checkpoint_of, fill, prepare
from trust import note
from trust.note import TreeHead
from trust.witness import Refusal, WitnessState, judge


def _fork_of(original: Society, root: Path) -> Society:
    """A home whose hub signs with the original's key and origin, over other lines."""
    fork = Society(root)
    prepare(fork)
    shutil.copy(original.home.trust.hub_key_file, fork.home.trust.hub_key_file)
    trust = fork.root / "trust.toml"
    public = original.home.trust.hub_public_text
    trust.write_text(
        "\n".join(
            f'hub_public_key = "{public}"' if row.startswith("hub_public_key") else row
            for row in trust.read_text().splitlines()
        )
        + "\n"
    )
    origin = note.parse(checkpoint(original)).head().origin
    set_hub(fork.root, tlog_origin=origin)
    return fork


@pytest.mark.long
def test_a_witness_cosigns_growth_and_refuses_a_fork(tmp_path: Path) -> None:
    """Cosigned twice as the room grows; a forked tree of the same size is refused and reported."""
    society = Society(tmp_path / "home")
    prepare(society)
    state = tmp_path / "witness-state.json"
    witness_args = ("witness", "--once", "--state", str(state), "--name", "witness/test")
    shown = run_cli(society.root, *witness_args, "--show-key")
    assert shown.returncode == 0, shown.stderr
    witness_key = shown.stdout.strip()
    assert witness_key.startswith("witness/test+")
    set_hub(society.root, witnesses=[witness_key])  # the hub keeps only its operator's witnesses
    society.start_hub()

    fill(society, 10)
    checkpoint_of(society, 10)
    first = run_cli(society.root, *witness_args)
    assert first.returncode == 0, first.stdout + first.stderr
    served = note.parse(checkpoint(society))
    assert len(served.signatures) == 2 and served.verify(note.parse_verifier(witness_key))
    ok = run_cli(society.root, "verify", "--witness", witness_key)
    assert ok.returncode == 0 and "signed by bullpen/" in ok.stdout, ok.stdout + ok.stderr

    fill(society, 7, start=10)
    checkpoint_of(society, 17)
    second = run_cli(society.root, *witness_args)  # consistent with 10: cosigned again
    assert second.returncode == 0, second.stdout + second.stderr
    assert json.loads(state.read_text())[served.head().origin]["size"] == 17
    other = run_cli(
        society.root,
        "witness",
        "--show-key",
        "--name",
        "witness/other",
        "--key-file",
        str(tmp_path / "other.key"),
    )
    missing = run_cli(society.root, "verify", "--witness", other.stdout.strip())
    assert (
        missing.returncode == 1
        and "no valid cosignature of the witness witness/other" in missing.stdout
    )

    fork = _fork_of(society, tmp_path / "fork")
    fork.start_hub()
    try:
        fill(fork, 17)  # the same size as the tree the witness cosigned, other lines
        forked = note.parse(checkpoint_of(fork, 17)).head()
        assert forked.size == 17 and forked.root != note.parse(checkpoint(society)).head().root
        refused = run_cli(
            society.root,
            *witness_args,
            "--hub",
            fork.strict_url,
            "--read-token-file",
            str(fork.home.trust.read_token_file),
        )
    finally:
        fork.stop_all()
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "REFUSED" in refused.stderr and "two histories" in refused.stderr
    assert json.loads(state.read_text())[forked.origin]["size"] == 17  # unchanged
    reports = wait_for(
        lambda: [
            line for line in society.lines() if (line.get("data") or {}).get("tlog") == "refused"
        ],
        20,
        "the witness's report in the room",
    )
    assert reports[0]["from"] == "witness" and reports[0]["data"]["kind"] == "fork"
    society.stop_all()


class TestJudge:
    def _state(self, tmp_path: Path, size: int, root: bytes) -> WitnessState:
        state = WitnessState(tmp_path / "state.json")
        state.record(TreeHead("o", size, root))
        return WitnessState(tmp_path / "state.json")  # read back from the file

    def test_a_smaller_tree_is_a_rollback(self, tmp_path: Path) -> None:
        """A tree smaller than the one cosigned is refused as a rollback."""
        state = self._state(tmp_path, 5, b"\x05" * 32)
        with pytest.raises(Refusal) as refused:
            judge(state, TreeHead("o", 4, b"\x04" * 32), lambda a, b: [])
        assert refused.value.kind == "rollback"

    def test_a_failed_consistency_proof_is_a_fork(self, tmp_path: Path) -> None:
        """A larger tree whose proof does not verify is refused as a fork."""
        state = self._state(tmp_path, 5, b"\x05" * 32)
        with pytest.raises(Refusal) as refused:
            judge(state, TreeHead("o", 9, b"\x09" * 32), lambda a, b: [b"\x00" * 32])
        assert refused.value.kind == "fork"

    def test_a_damaged_state_file_is_an_error(self, tmp_path: Path) -> None:
        """A state file the witness did not write stops it with what to do (never a fresh start)."""
        (tmp_path / "state.json").write_text("{not json")
        with pytest.raises(ValueError, match="restore it from a backup"):
            WitnessState(tmp_path / "state.json")


def test_the_witness_unit_renders_and_verifies(tmp_path: Path) -> None:
    """`bullpen units install --witness` writes bullpen-witness.service, which systemd accepts."""
    import shutil as sh

    from tests.test_up import verify_output

    society = Society(tmp_path / "home")
    target = tmp_path / "units"
    done = run_cli(
        society.root, "units", "install", "--dir", str(target), "--witness", "--nicks", "echo"
    )
    assert done.returncode == 0, done.stderr
    unit = (target / "bullpen-witness.service").read_text()
    assert f"--home {society.root} witness" in unit and "StateDirectory=" in unit
    assert "systemctl --user enable --now bullpen-witness.service" in done.stdout
    plain = run_cli(
        society.root, "units", "install", "--dir", str(tmp_path / "plain"), "--nicks", "echo"
    )
    assert not (tmp_path / "plain" / "bullpen-witness.service").exists(), plain.stderr
    if sh.which("systemd-analyze") is not None:
        assert "witness" not in verify_output(target, tmp_path)

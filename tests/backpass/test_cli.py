"""`bullpen backpass` as a person runs it: bad input is refused before the ask, with a real hub up."""

from __future__ import annotations

from pathlib import Path

from tests.support import Society, run_cli


def _asks(society: Society) -> list[dict[str, object]]:
    return [line for line in society.lines() if line.get("to") == "@foreman"]


class TestRefusals:
    def test_society_toml_as_the_state_file_is_refused_untouched(self, society: Society) -> None:
        """The audit's data loss: exit 2, the file named (outside [roots] state, never read, so
        none of it is shown), no ask, no write, no lock file."""
        society.start_hub()
        target = society.root / "society.toml"
        before = target.read_bytes()
        mode = target.stat().st_mode
        listing = sorted(p.name for p in society.root.iterdir())
        done = run_cli(society.root, "backpass", "--state", str(target))
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stdout == ""
        assert f"--state: refused the backpass state {target}" in done.stderr
        assert "outside [roots] state" in done.stderr and "operator =" not in done.stderr
        assert target.read_bytes() == before and target.stat().st_mode == mode
        assert sorted(p.name for p in society.root.iterdir()) == listing  # no society.toml.lock
        assert _asks(society) == []

    def test_every_bad_option_is_refused_before_the_ask(self, society: Society) -> None:
        """Each bad value exits 2 with a sentence naming the option; the room gets no ask.

        (The numbers may be refused by argparse or by the backpass command; either says which.)
        """
        society.start_hub()
        garbage = society.root / "state" / "notes.txt"
        garbage.write_text("garbage line here\n")
        state_root = society.root / "state"
        cases = {
            ("--state", str(garbage)): "line 1 is 'garbage line here'",
            ("--state", str(state_root / "nope" / "state")): "state/nope does not exist",
            ("--state", str(state_root)): "is a folder",
            ("--state", "/proc/nope/state"): "outside [roots] state",
            ("--state", str(society.root)): "outside [roots] state",
            ("--traces", str(society.root / "secrets")): "outside [roots] traces",
            ("--wait-timeout", "0"): "--wait-timeout",
            ("--wait-timeout", "-1"): "--wait-timeout",
            ("--wait-timeout", "nan"): "--wait-timeout",
            ("--timeout", "inf"): "--timeout",
            ("--concurrency", "0"): "--concurrency",
        }
        for args, says in cases.items():
            done = run_cli(society.root, "backpass", *args, timeout=30)
            assert done.returncode == 2, (args, done.stdout + done.stderr)
            assert says in done.stderr, (args, done.stderr)
            assert "Traceback" not in done.stderr
        assert garbage.read_text() == "garbage line here\n"
        assert not Path(f"{garbage}.lock").exists()
        assert _asks(society) == []

    def test_a_bad_configured_state_file_is_a_config_error(self, society: Society) -> None:
        """A [backpass] state that is not a state file exits 78, so a unit does not retry it."""
        society.start_hub()
        state = society.root / "state" / "backpass.sha256"
        state.write_text("garbage line here\n")
        done = run_cli(society.root, "backpass", timeout=30)
        assert done.returncode == 78, done.stdout + done.stderr
        assert f"[backpass] state: {state} is not a backpass state file" in done.stderr
        assert state.read_text() == "garbage line here\n"
        assert _asks(society) == []

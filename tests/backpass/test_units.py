"""The systemd user unit templates for the nightly backpass."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.backpass.helpers import REPO_ROOT

UNITS = REPO_ROOT / "systemd"


def _unit(name: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, comment_prefixes=("#",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((UNITS / name).read_text())
    return parser


class TestUnits:
    def test_service_is_a_hardened_oneshot(self) -> None:
        """Type=oneshot runs `@BULLPEN@ --home @HOME@ backpass` to the journal, hardened for a user unit."""
        service = _unit("bullpen-backpass.service")["Service"]
        assert service["Type"] == "oneshot"
        assert service["ExecStart"] == "@BULLPEN@ --home @HOME@ backpass"
        assert service["StandardOutput"] == "journal" and service["StandardError"] == "journal"
        assert service["NoNewPrivileges"] == "yes"
        assert service["PrivateUsers"] == "yes"  # namespace options need it in a user unit

    def test_timer_is_nightly_and_persistent(self) -> None:
        """The timer fires at 03:00 every day, catches up after downtime and spreads its start."""
        timer = _unit("bullpen-backpass.timer")
        assert timer["Timer"]["OnCalendar"] == "*-*-* 03:00:00"
        assert timer["Timer"]["Persistent"] == "true"
        assert timer["Timer"]["RandomizedDelaySec"]
        assert timer["Timer"]["Unit"] == "bullpen-backpass.service"
        assert timer["Install"]["WantedBy"] == "timers.target"

    def test_systemd_accepts_the_rendered_units(self, tmp_path: Path) -> None:
        """Rendered with real paths, `systemd-analyze --user verify` finds nothing wrong."""
        if shutil.which("systemd-analyze") is None:
            pytest.skip("systemd-analyze is not installed")
        home = tmp_path / "home"
        home.mkdir()
        for name in ("bullpen-backpass.service", "bullpen-backpass.timer"):
            text = (UNITS / name).read_text().replace("@BULLPEN@", "/bin/true")
            text = text.replace("@HOME@", str(home)).replace("@WRITABLE@", str(home))
            (tmp_path / name).write_text(text)
        runtime = tmp_path / "xdg"
        runtime.mkdir(mode=0o700)
        done = subprocess.run(
            [
                "systemd-analyze",
                "--user",
                "verify",
                "bullpen-backpass.service",
                "bullpen-backpass.timer",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        )
        assert done.returncode == 0, done.stdout + done.stderr

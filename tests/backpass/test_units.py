"""The systemd user units for the nightly backpass, as `bullpen units install` renders them.

(`systemd-analyze verify` of every rendered unit is in tests/test_up.py.)
"""

from __future__ import annotations

import configparser
from pathlib import Path

from agents.cli import units
from tests.support import Society


def _unit(society: Society, name: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, comment_prefixes=("#",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(units.render(society.home, name))
    return parser


class TestUnits:
    def test_service_is_a_hardened_oneshot(self, society: Society) -> None:
        """Type=oneshot runs `bullpen --home HOME backpass` to the journal, hardened for a user unit."""
        service = _unit(society, "bullpen-backpass.service")["Service"]
        assert service["Type"] == "oneshot"
        program = " ".join(units.systemd_word(w) for w in units.bullpen_command())
        home = units.systemd_word(str(society.root))
        assert service["ExecStart"] == f":{program} --home {home} backpass"
        assert service["StandardOutput"] == "journal" and service["StandardError"] == "journal"
        assert service["NoNewPrivileges"] == "yes"
        assert service["PrivateUsers"] == "yes"  # namespace options need it in a user unit

    def test_timer_is_nightly_and_persistent(self, society: Society) -> None:
        """The timer fires at 03:00 every day, catches up after downtime and spreads its start."""
        timer = _unit(society, "bullpen-backpass.timer")
        assert timer["Timer"]["OnCalendar"] == "*-*-* 03:00:00"
        assert timer["Timer"]["Persistent"] == "true"
        assert timer["Timer"]["RandomizedDelaySec"]
        assert timer["Timer"]["Unit"] == "bullpen-backpass.service"
        assert timer["Install"]["WantedBy"] == "timers.target"

    def test_install_writes_the_backpass_units(self, society: Society, tmp_path: Path) -> None:
        """`bullpen units install` writes the service and the timer beside the others."""
        written = {p.name for p in units.install(society.home, tmp_path)}
        assert {"bullpen-backpass.service", "bullpen-backpass.timer"} <= written

"""`bullpen units install` writes bullpen-gateway.service for a home with a [gateway] section."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.gateway.helpers import FakeBackend, GatewayHome
from tests.support import Society, run_cli
from tests.test_up import exec_start, verify_output

StartFake = Callable[..., FakeBackend]


def test_the_gateway_unit_is_rendered_and_verifies(gw: GatewayHome, tmp_path: Path) -> None:
    """With [gateway], the unit runs `gateway serve` for this home, is enabled, and verifies."""
    gw.configure(
        {"local": {"base_url": "http://127.0.0.1:8000/v1", "prefixes": ["q"]}},
        ledger=str(tmp_path / "elsewhere" / "ledger.jsonl"),
    )
    target = tmp_path / "units"
    done = run_cli(gw.society.root, "units", "install", "--dir", str(target), "--nicks", "echo")
    assert done.returncode == 0, done.stderr
    unit = (target / "bullpen-gateway.service").read_text()
    assert exec_start(unit).endswith(f" --home {gw.society.root} gateway serve")
    assert "RestartPreventExitStatus=78" in unit
    assert str(tmp_path / "elsewhere") in unit  # the ledger's folder is writable
    assert "bullpen-gateway.service" in done.stdout  # enabled and started with the rest
    assert verify_output(target, tmp_path) == ""


def test_no_gateway_no_unit(society: Society, tmp_path: Path) -> None:
    """A home without [gateway] (an earlier `bullpen init`) gets no gateway unit."""
    target = tmp_path / "units"
    done = run_cli(society.root, "units", "install", "--dir", str(target))
    assert done.returncode == 0, done.stderr
    assert not (target / "bullpen-gateway.service").exists()
    assert "bullpen-gateway" not in done.stdout

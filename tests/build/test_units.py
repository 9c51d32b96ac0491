"""The build's nicks in `bullpen units install` and `bullpen trust check`."""

from __future__ import annotations

from pathlib import Path

from agents.cli import units
from agents.cli.trustcheck import runner_problem, static_rows
from agents.config import NickConfig
from tests.build.helpers import set_build
from tests.support import Society

GRINDER = "agents.build.steps:grind_spec"


def test_grinder_units_carry_the_standing_ladder_and_share_tmp(tmp_path: Path) -> None:
    society = Society(tmp_path / "home")
    set_build(
        society.root, root=str(tmp_path / "b"), alias=str(tmp_path / "s"), tiers=["cheap", "strong"]
    )
    dropins = units.build_dropins(society.home)
    assert set(dropins) == {
        f"bullpen-lurker@{nick}.service.d/build.conf"
        for nick in ("sandbox", "testdesigner", "py", "godev", "jsdev")
    }
    py = dropins["bullpen-lurker@py.service.d/build.conf"].splitlines()
    assert "Environment=BULLPEN_GRIND_TIERS=cheap,strong" in py and "PrivateTmp=no" in py
    sandbox = dropins["bullpen-lurker@sandbox.service.d/build.conf"]
    assert "BULLPEN_GRIND_TIERS" not in sandbox and "PrivateTmp=no" in sandbox
    written = units.install(society.home, tmp_path / "units")
    assert (tmp_path / "units/bullpen-lurker@godev.service.d/build.conf").is_file()
    assert all(path.is_file() for path in written)


def test_trust_check_flags_a_grinder_whose_runner_is_missing(tmp_path: Path) -> None:
    nowhere = NickConfig(handler=GRINDER, env={"PATH": str(tmp_path)})
    problem = runner_problem("godev", nowhere)
    assert problem is not None and "needs 'go'" in problem and "golang-go" in problem
    assert "needs 'node'" in str(runner_problem("jsdev", nowhere))
    assert runner_problem("py", nowhere) is None  # pytest runs on the lurker's own python
    assert runner_problem("godev", NickConfig(handler=GRINDER)) is None  # installed here
    society = Society(tmp_path / "home")
    rows, _ = static_rows(society.home)
    named = {row.nick for row in rows}
    assert {"sandbox", "testdesigner", "py", "godev", "jsdev"} <= named

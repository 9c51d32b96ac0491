"""Step time budgets follow the seats a step's calls go to, and an eval carries the home's
step settings into its fresh home (issue 37: the scorer's 120 s budget, with four batches
sent at once to a one-slot server, timed out, and `bullpen eval` could not raise it)."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from agents.config import NickConfig, SocietyConfig
from agents.packaged import defaults
from agents.runtime.budget import step_budget, with_budget
from agents.seats.registry import parse_seat_table
from room.errors import ConfigError
from tests.realmodel.helpers import set_section
from tests.replay.conftest import FAKES, cmd_table
from tests.support import Society, run_cli, set_seat

OPENAI = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
CMD = {"kind": "cmd", "command": ["model"]}
SCORER = NickConfig(handler="agents.expedition.steps:score_batch", timeout_s=120, concurrency=4)


def society(**seats: dict[str, object]) -> SocietyConfig:
    return SocietyConfig(seats=seats)


def test_a_one_slot_server_gives_each_wave_of_asks_its_budget() -> None:
    """Four batches at once on one slot are answered one after another: 4 × 120 s."""
    assert step_budget(society(score={**OPENAI, "slots": 1}), SCORER) == 480
    assert step_budget(society(score={**OPENAI, "slots": 2}), SCORER) == 240
    assert step_budget(society(score={**OPENAI, "slots": 8}), SCORER) == 120


def test_a_seat_step_timeout_raises_the_budget_and_never_lowers_it() -> None:
    assert step_budget(society(score={**CMD, "step_timeout_s": 900}), SCORER) == 900
    assert step_budget(society(score={**CMD, "step_timeout_s": 5}), SCORER) == 120
    assert step_budget(society(), SCORER) == 120  # no seat settings: the nick's own


def test_the_budget_follows_the_nick_seat_and_the_fallbacks() -> None:
    seats = society(
        score={"kind": "local"},
        big={**OPENAI, "fallback": "slow"},
        slow={**CMD, "step_timeout_s": 1000},
    )
    pinned = SCORER.model_copy(update={"seat": "big"})
    assert step_budget(seats, SCORER) == 120  # the role's table says nothing
    assert step_budget(seats, pinned) == 1000  # its own seat's fallback does
    assert with_budget(seats, pinned).timeout_s == 1000
    assert with_budget(seats, SCORER) is SCORER


@pytest.mark.parametrize(("key", "value"), [("slots", 0), ("step_timeout_s", -1)])
def test_a_bad_budget_key_is_refused_naming_the_table(key: str, value: int) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_seat_table("score", {"kind": "local", key: value})
    assert f"[seats.score] {key}" in refused.value.message


def test_an_eval_home_takes_the_step_settings_but_no_path(tmp_path: Path) -> None:
    """The operator's [nicks.scorer] timeout and concurrency and its [expedition] batch size
    reach the eval home; its kb and briefs paths, and its [build] root, do not."""
    operator = Society(tmp_path / "home")
    set_section(operator.root, "nicks.scorer", timeout_s=777, concurrency=3)
    set_section(operator.root, "expedition", batch_size=5, kb="/nowhere/kb")
    set_section(operator.root, "build", max_iterations=3)
    toml_file = operator.root / "society.toml"
    toml_file.write_text(
        re.sub(r"^root = .*$", 'root = "/nowhere/builds"', toml_file.read_text(), flags=re.M)
    )
    suite = tmp_path / "suite"
    shutil.copytree(defaults() / "eval" / "example" / "step-score-none", suite / "score-none")
    done = run_cli(operator.root, "eval", str(suite), "--keep", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    kept = Path(json.loads(done.stdout)["seats"][0]["home"])
    try:
        toml = tomllib.loads((kept / "society.toml").read_text())
        assert toml["nicks"]["scorer"]["timeout_s"] == 777
        assert toml["nicks"]["scorer"]["concurrency"] == 3
        assert toml["expedition"]["batch_size"] == 5 and toml["expedition"]["kb"] == "kb"
        assert toml["build"]["max_iterations"] == 3
        assert toml["build"]["root"] != "/nowhere/builds"
    finally:
        shutil.rmtree(kept.parent, ignore_errors=True)


@pytest.mark.long
@pytest.mark.parametrize("slots", [None, 1])
def test_score_batches_on_a_one_slot_seat_finish_within_their_budget(
    tmp_path: Path, slots: int | None
) -> None:
    """The expedition's score batches, four at once, on a fake model that answers one call
    at a time (3 s each) with the scorer's budget at 8 s: without `slots` the later batches
    run out of time and the case fails; with `slots = 1` their budget is four waves and the
    case passes. The eval takes the 8 s and the batch size from the operator's home."""
    operator = Society(tmp_path / "home")
    env = {
        "FAKE_EXPEDITION_MODE": "one-slot",
        "FAKE_EXPEDITION_SLOT": str(tmp_path / "slot.lock"),
        "FAKE_EXPEDITION_SLEEP": "3",
    }
    table = cmd_table(FAKES / "expedition_model.py", env)
    set_seat(operator.root, "fake", table + (f"\nslots = {slots}" if slots else ""))
    set_section(operator.root, "nicks.scorer", timeout_s=8, concurrency=4)
    set_section(operator.root, "expedition", batch_size=3)
    suite = tmp_path / "suite"
    shutil.copytree(defaults() / "eval" / "example" / "sample-patience", suite / "patience")
    done = run_cli(operator.root, "eval", str(suite), "--seat", "fake", "--json", timeout=600)
    (seat,) = json.loads(done.stdout)["seats"]
    (result,) = seat["results"]
    if slots is None:
        assert done.returncode == 1 and not result["passed"], result
        assert "scorer.answered" in result["failed_gates"], result
    else:
        assert done.returncode == 0 and result["passed"], result

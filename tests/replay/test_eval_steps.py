"""`bullpen eval`'s step cases: one step's input and validators of its answer, per-step pass
rates, hostile cases refused, and `--rounds` (the learning loop, measured)."""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from agents.evaluate.cases import load_case, load_suite
from agents.evaluate.runners import CaseResult
from agents.evaluate.scoreboard import SeatScore, render
from agents.evaluate.stepcases import PIPELINE, StepCase
from agents.packaged import defaults
from room.errors import BullpenError
from tests.replay.conftest import FAKES, cmd_table
from tests.support import Proc, Society, run_cli, set_seat, wait_for

EXAMPLE = defaults() / "eval" / "example"


def copy_cases(suite: Path, *names: str) -> Path:
    for name in names:
        shutil.copytree(EXAMPLE / name, suite / name)
    return suite


def test_the_example_suite_has_ten_step_cases_for_each_pipeline() -> None:
    cases = [c.case for c in load_suite("example") if isinstance(c.case, StepCase)]
    per_pipeline = Counter(PIPELINE[case.step] for case in cases)
    assert per_pipeline["expedition"] >= 10, per_pipeline
    assert per_pipeline["backpass"] >= 10, per_pipeline
    assert per_pipeline["build"] >= 10, per_pipeline


STEP = 'kind = "step"\n'
SCORE_INPUT = (
    '[input]\npattern = "p"\nkeyword = "k"\nterms = ["t"]\nrows = [{ id = "r1", summary = "s" }]\n'
)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (STEP + 'step = "judge"\n[input]\n', "step: Input should be 'terms'"),
        (STEP + 'step = "score"\n[input]\npattern = "p"\n', "input.keyword: Field required"),
        (STEP + 'step = "score"\n' + SCORE_INPUT + '[expect]\nhigh = ["r9"]\n', "r9"),
        (STEP + 'step = "score"\n' + SCORE_INPUT + '[expect]\nhihg = ["r1"]\n', "expect.hihg"),
        (
            STEP + 'step = "analysis"\n[input]\ntrace = "' + "x" * 20_001 + '"\n',
            "input.trace: String should have at most 20000 characters",
        ),
        (
            STEP + 'step = "code"\n[input]\nproblem = "p"\nrepo = "../../.."\n'
            'spec_relative = "t.py"\n',
            "leaves the case's folder",
        ),
    ],
    ids=["unknown-step", "missing-input", "unknown-row", "misspelt-expect", "huge-trace", "out"],
)
def test_a_malformed_step_case_is_refused_naming_file_and_field(
    tmp_path: Path, text: str, said: str
) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "case.toml").write_text(text)
    with pytest.raises(BullpenError) as refused:
        load_case(tmp_path / "broken")
    assert str(tmp_path / "broken" / "case.toml") in refused.value.message
    assert said in refused.value.message, refused.value.message


def test_a_step_case_repo_linking_out_is_refused_before_any_seat(tmp_path: Path) -> None:
    """A build step case whose repo holds a link to the home's read token: exit 2, named."""
    society = Society(tmp_path / "home")
    suite = copy_cases(tmp_path / "suite", "step-code-discount")
    (suite / "step-code-discount" / "repo" / "token.txt").symlink_to(
        society.root / "secrets" / "read-token"
    )
    done = run_cli(society.root, "eval", str(suite))
    assert done.returncode == 2, done.stderr
    assert "token.txt" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_step_answer_is_judged_by_the_case_validators(tmp_path: Path) -> None:
    """A fake model that scores every row 0 and picks no deep cut: the score case that wants
    two rows high fails `score.high`; the scotoma case that wants none passes with no call
    (its rows scored 0 and 1: the step offers no deep cut, as the pipeline does); the
    per-step rates say so, each call is one model call, and the exit is 1."""
    society = Society(tmp_path / "home")
    log = tmp_path / "calls.jsonl"
    set_seat(society.root, "fake", cmd_table(FAKES / "step_model.py", {"FAKE_STEP_LOG": str(log)}))
    suite = copy_cases(tmp_path / "suite", "step-score-waiting", "step-scotoma-none")
    done = run_cli(society.root, "eval", str(suite), "--seat", "fake", "--json", timeout=300)
    assert done.returncode == 1, done.stderr
    (seat,) = json.loads(done.stdout)["seats"]
    results = {r["case"]: r for r in seat["results"]}
    assert results["step-score-waiting"]["failed_gates"] == ["score.high"]
    assert "r1" in results["step-score-waiting"]["note"]
    assert results["step-scotoma-none"]["passed"] is True
    assert seat["steps"]["score"] == {"cases": 1, "passed": 0, "skipped": 0, "rate": 0.0}
    assert seat["steps"]["scotoma"] == {"cases": 1, "passed": 1, "skipped": 0, "rate": 1.0}
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["step"] for c in calls] == ["score"]
    assert seat["model_calls"] == len(calls)
    table = run_cli(society.root, "eval", str(suite), "--seat", "fake", timeout=300).stdout
    assert "score" in table and "0/1 0%" in table and "1/1 100%" in table


def test_a_code_step_is_green_only_when_its_spec_passes(tmp_path: Path) -> None:
    """Build step cases on a fake coding model (a real OpenAI-protocol server) that fixes
    only `total`: the discount case's spec runs green behind the fence and passes; the
    fahrenheit case gets a blind guess that fails a validator; the testdesign case, a
    code edit where a spec is wanted, fails too."""
    society = Society(tmp_path / "home")
    model = Proc(
        [sys.executable, str(FAKES / "fake_code_model.py"), "--func", "total",
         "--wrong", "price - discount", "--right", "price * (1 - discount)"],
        tmp_path / "model.log",
    )  # fmt: skip
    try:
        port = wait_for(lambda: model.output().split("\n", 1)[0].strip() or None, 30, "model")
        set_seat(
            society.root,
            "coder",
            f'kind = "openai"\nbase_url = "http://127.0.0.1:{port}/v1"\nmodel = "fix"\n'
            "timeout_s = 30",
        )
        suite = copy_cases(
            tmp_path / "suite", "step-code-discount", "step-code-fahrenheit", "step-testdesign-add"
        )
        done = run_cli(society.root, "eval", str(suite), "--seat", "coder", "--json", timeout=300)
    finally:
        model.stop()
    assert done.returncode == 1, done.stderr
    (seat,) = json.loads(done.stdout)["seats"]
    results = {r["case"]: r for r in seat["results"]}
    assert results["step-code-discount"]["passed"] is True, results["step-code-discount"]
    assert results["step-code-fahrenheit"]["passed"] is False
    assert results["step-code-fahrenheit"]["failed_gates"], results["step-code-fahrenheit"]
    assert results["step-testdesign-add"]["passed"] is False
    assert seat["steps"]["code"]["passed"] == 1 and seat["skipped"] == 0
    assert seat["server_calls"] == 3  # each step asked once, counted from the seat's log


def test_rounds_are_refused_without_lessons_or_out_of_bounds(tmp_path: Path) -> None:
    society = Society(tmp_path / "home")
    off = run_cli(society.root, "eval", "example", "--rounds", "2", "--lessons", "off")
    assert off.returncode == 2 and "--lessons off" in off.stderr, off.stderr
    many = run_cli(society.root, "eval", "example", "--rounds", "9")
    assert many.returncode == 2 and "1 to 5" in many.stderr, many.stderr


@pytest.mark.long
@pytest.mark.timeout(900)
def test_rounds_with_the_built_in_seat_stay_at_every_case_it_can_answer(tmp_path: Path) -> None:
    """`eval example --rounds 2`: both rounds on the scoreboard, each passing every case the
    built-in seat can answer; between them a backpass over round 1's traces was merged."""
    society = Society(tmp_path / "home")
    done = run_cli(society.root, "eval", "example", "--rounds", "2", "--json", timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    first, second = json.loads(done.stdout)["seats"]
    assert (first["round"], second["round"]) == (1, 2)
    for score in (first, second):
        assert score["passed"] == score["cases"] - score["skipped"] >= 22, score["failed_gates"]
    assert first["learned"] and "merged" in first["learned"], first["learned"]
    assert second["learned"] is None  # no backpass after the last round
    rounds = [SeatScore("configured", True, round=n) for n in (1, 2)]
    rounds[0].cases = [CaseResult(**r) for r in first["results"]]
    rounds[0].learned = first["learned"]
    table = render("example", rounds)
    assert "round 1 (lessons on)" in table and "round 2 (lessons on)" in table
    assert f"after this round: {first['learned']}" in table


@pytest.mark.long
@pytest.mark.timeout(900)
def test_a_lesson_kept_in_round_one_is_handed_to_the_steps_of_round_two(tmp_path: Path) -> None:
    """The synthesis seat is a fake that proposes a public bullet: round 1 hands no lesson
    (a fresh memory), its backpass keeps one (the two score cases' transcripts say the same
    sentence: a line seen in two sessions, as a new lesson needs), and round 2's steps are
    handed it."""
    society = Society(tmp_path / "home")
    set_seat(society.root, "synthesis", cmd_table(FAKES / "step_model.py", {}))
    suite = copy_cases(tmp_path / "suite", "step-score-waiting", "step-score-thrift")
    done = run_cli(society.root, "eval", str(suite), "--rounds", "2", "--json", timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    first, second = json.loads(done.stdout)["seats"]
    assert first["lessons_handed"] == 0
    assert "merged public" in first["learned"], first["learned"]
    assert second["lessons_handed"] > 0
    step = next(r for r in second["results"] if r["step"] == "score")
    assert step["lessons"] > 0 and step["passed"], step

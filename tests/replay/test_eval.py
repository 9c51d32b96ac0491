"""`bullpen eval`: a suite against a fake `cmd` seat, and a malformed case refused."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.build.helpers import PY_FIX, PY_SPEC, coder_seat, ticket
from tests.replay.conftest import FAKES, cmd_table
from tests.support import Society, run_cli, set_seat

CASE = """kind = "expedition"
title = "Waiting Is Part of the Work"
keyword = "patience"
kb = "@sample"

[expect]
deep_cuts = [{deep}]
"""


@pytest.fixture
def operator(tmp_path: Path) -> Society:
    society = Society(tmp_path / "home")
    set_seat(society.root, "fake", cmd_table(FAKES / "expedition_model.py", {}))
    return society


def write_case(suite: Path, name: str, text: str) -> None:
    (suite / name).mkdir(parents=True)
    (suite / name / "case.toml").write_text(text)


def test_a_suite_with_one_case_passed_and_one_failed(operator: Society, tmp_path: Path) -> None:
    """The fake seat finds the lime-mortar log, not a digest: one pass, one fail, and the
    failed case names the expectation it missed; exit 1 because a case failed."""
    suite = tmp_path / "suite"
    write_case(suite, "finds-lime", CASE.format(deep='"voice-logs/2024-04-lime-mortar.md"'))
    write_case(suite, "wants-digest", CASE.format(deep='"digests/seasoning-oak.md"'))
    done = run_cli(operator.root, "eval", str(suite), "--seat", "fake", "--json", timeout=400)
    assert done.returncode == 1, done.stderr
    board = json.loads(done.stdout)
    (seat,) = board["seats"]
    assert seat["seat"] == "fake" and seat["cases"] == 2 and seat["passed"] == 1
    results = {r["case"]: r for r in seat["results"]}
    assert results["finds-lime"]["passed"] is True
    assert results["wants-digest"]["passed"] is False
    assert results["wants-digest"]["failed_gates"] == ["expect.deep_cuts"]
    assert seat["failed_gates"] == {"expect.deep_cuts": 1}
    assert seat["model_calls"] >= 6  # termgen, score and scotoma, in each case
    # the operator's home ran nothing: its room is as `bullpen init` left it
    assert operator.lines() == [] or all(line["type"] != "ask" for line in operator.lines())


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('kind = "expedition"\ntitle = "T"\nkb = "@sample"\n[expect]\n', "keyword: Field required"),
        ('kind = "audit"\n', 'kind: set kind = "expedition", "build", "backpass" or "step"'),
        (
            'kind = "expedition"\ntitle = "T"\nkeyword = "k"\nkb = "@sample"\n[expect]\n'
            'deep_cut = ["a.md"]\n',
            "expect.deep_cut: Extra inputs are not permitted",
        ),
        ('kind = "build"\nticket = "../../etc/passwd"\nhidden_tests = "t"\n', "leaves the case"),
    ],
    ids=["missing-field", "unknown-kind", "misspelt-key", "path-outside"],
)
def test_a_malformed_case_is_refused_naming_file_and_field(
    operator: Society, tmp_path: Path, text: str, said: str
) -> None:
    suite = tmp_path / "suite"
    write_case(suite, "broken", text)
    done = run_cli(operator.root, "eval", str(suite))
    assert done.returncode == 2, done.stderr
    assert str(suite / "broken" / "case.toml") in done.stderr and said in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.fixture(scope="module")
def example_kept(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[subprocess.CompletedProcess[str]]:
    """One `bullpen eval example --keep --json` run (lessons on, the default), read by the
    tests below: a whole run of the example suite costs 8-25 s, and they only read it."""
    society = Society(tmp_path_factory.mktemp("eval-example") / "home")
    done = run_cli(society.root, "eval", "example", "--keep", "--json", timeout=400)
    yield done
    try:
        kept = Path(json.loads(done.stdout)["seats"][0]["home"])
    except (ValueError, KeyError, IndexError):
        return
    shutil.rmtree(kept.parent if kept.name == "home" else kept, ignore_errors=True)


@pytest.mark.long
def test_the_shipped_example_suite_passes_with_the_local_seat(
    tmp_path: Path, example_kept: subprocess.CompletedProcess[str]
) -> None:
    """`bullpen eval example` by name (config/eval/example, in the wheel): every case the
    built-in seat can answer passes, with and without lessons (the build's step cases are
    skipped, never passed: it writes no code), and the scoreboard counts their model calls."""
    society = Society(tmp_path / "home")
    for lessons in ("on", "off"):
        done = example_kept
        if lessons == "off":
            args = ("eval", "example", "--lessons", "off", "--json")
            done = run_cli(society.root, *args, timeout=400)
        assert done.returncode == 0, done.stdout + done.stderr
        (seat,) = json.loads(done.stdout)["seats"]
        assert seat["seat"] == "configured" and seat["lessons"] == lessons
        assert seat["failed_gates"] == {}
        assert seat["passed"] == seat["cases"] - seat["skipped"] >= 22
        kinds = {r["case"]: r["kind"] for r in seat["results"] if r["step"] is None}
        assert kinds == {"sample-backpass": "backpass", "sample-patience": "expedition"}
        skipped = {r["step"] for r in seat["results"] if r["skipped"]}
        assert skipped == {"code", "testdesign"}
        steps = seat["steps"]
        assert all(steps[s]["rate"] == 1.0 for s in ("terms", "score", "scotoma"))
        assert all(steps[s]["rate"] == 1.0 for s in ("analysis", "synthesis"))
        # the runs' calls, and one per step case but scotoma's "none" (no row scored 2 or
        # more is left to offer, so the step's code answers it and no model is asked)
        assert seat["model_calls"] >= 4 + 7 + 19


def test_hidden_tests_run_on_the_artifact_behind_the_fence(tmp_path: Path) -> None:
    """A build case's hidden tests judge the green artifact: a right one passes, a wrong one
    fails with pytest's report; the run sees none of this process's environment, and no
    installed pytest plugin loads itself unasked (as the build's own python runner: the test
    extra's arize-phoenix-client plugin cost each run about 10 s of CPU on a busy machine)."""
    from agents.evaluate.runners import hidden_tests

    artifact = tmp_path / "clone"
    (artifact / "hidden").mkdir(parents=True)
    (artifact / "hidden" / "test_calc.py").write_text(
        "import os\nfrom calc import add\n\n"
        "def test_add():\n    assert add(2, 2) == 4\n\n"
        "def test_no_secrets_inherited():\n    assert 'BULLPEN_HOME' not in os.environ\n\n"
        "def test_no_plugin_autoloaded(pytestconfig):\n"  # pytest-xdist is installed here
        "    assert not pytestconfig.pluginmanager.has_plugin('xdist')\n"
    )
    (artifact / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    home = tmp_path / "eval-home"
    home.mkdir()
    ran = hidden_tests(artifact, artifact / "hidden", home)
    assert ran.returncode == 0, ran.output
    (artifact / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    ran = hidden_tests(artifact, artifact / "hidden", home)
    assert ran.returncode == 1 and "test_add" in ran.output and "1 failed" in ran.output


BUILD_TICKET = ticket("@REPO@", "@REPO@/tests/test_calc.py", tiers="pyfix")


def build_case(suite: Path, name: str, hidden: str) -> None:
    """A build case: the spec as the build dir's starting file, @REPO@ in the ticket, and
    hidden tests the seats never see."""
    folder = suite / name
    (folder / "repo" / "tests").mkdir(parents=True)
    (folder / "repo" / "tests" / "test_calc.py").write_text(PY_SPEC)
    (folder / "hidden").mkdir()
    (folder / "hidden" / "test_accept.py").write_text(hidden)
    (folder / "ticket.md").write_text(BUILD_TICKET)
    (folder / "case.toml").write_text(
        'kind = "build"\nticket = "ticket.md"\nhidden_tests = "hidden"\nrepo = "repo"\n'
    )


def build_operator(tmp_path: Path, log: Path) -> Society:
    """An operator's home with `fake` for the model roles and `pyfix`, a cmd code seat that
    writes the fix (and logs each call, its prompt included, to `log`)."""
    operator = Society(tmp_path / "home")
    solution = tmp_path / "solution"
    solution.mkdir()
    (solution / "calc.py").write_text(PY_FIX)
    coder_seat(
        operator.root, "pyfix", "copy", FAKE_CODER_SOLUTION=str(solution), FAKE_CODER_LOG=str(log)
    )
    set_seat(operator.root, "fake", cmd_table(FAKES / "expedition_model.py", {}))
    return operator


def test_a_build_case_judged_by_hidden_tests_on_the_green_artifact(tmp_path: Path) -> None:
    """A build case ground to green by a fake code seat (a real program writing the fix) in
    the eval's own build root, then judged by hidden tests the seat never saw: it passes, the
    code seat's call is counted, and the operator's home held no build. (A failing artifact
    is test_hidden_tests_run_on_the_artifact_behind_the_fence's; one build keeps CI short.)"""
    log = tmp_path / "pyfix.log"
    operator = build_operator(tmp_path, log)
    suite = tmp_path / "suite"  # `--seat fake` puts fake in the roles; pyfix, a tier, stays
    build_case(
        suite,
        "adds",
        "from calc import add, sub\n\ndef test_both():\n    assert add(40, 2) - sub(2, 2) == 42\n",
    )
    done = run_cli(operator.root, "eval", str(suite), "--seat", "fake", "--json", timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    (seat,) = json.loads(done.stdout)["seats"]
    (result,) = seat["results"]
    assert (result["case"], result["kind"], result["passed"]) == ("adds", "build", True), result
    assert result["failed_gates"] == [] and result["thread"].startswith("build-")
    assert (seat["cases"], seat["passed"], seat["failed_gates"]) == (1, 1, {})
    calls = log.read_text().splitlines()
    assert len(calls) == 1 and json.loads(calls[0])["tier"] == "pyfix"
    assert str(tmp_path / "home") not in json.loads(calls[0])["cwd"]


def test_keep_keeps_the_home_whose_threads_it_names(
    example_kept: subprocess.CompletedProcess[str],
) -> None:
    """`eval --keep`: the home stays (and is named, in the JSON and on stderr), and a case's
    thread opens there with `bullpen replay --list`."""
    done = example_kept
    (seat,) = json.loads(done.stdout)["seats"]
    kept = Path(seat["home"])
    assert kept.is_dir() and (kept / "society.toml").is_file(), done.stderr
    assert f"kept the home {kept}" in done.stderr
    thread = next(r["thread"] for r in seat["results"] if r.get("thread"))
    listed = run_cli(kept, "replay", thread, "--list")
    assert listed.returncode == 0, listed.stderr

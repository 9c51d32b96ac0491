"""`bullpen eval` on a hostile suite: links to the operator's secrets, acceptance tests a code
seat goes looking for, and a case.toml built to exhaust the parser.

Each drives the real `bullpen eval`; the seats are real programs (tests/fakes) that record
every prompt they are given, so "the secret is in no prompt" is read from what they saw.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.build.helpers import PY_FIX, coder_seat, set_build
from tests.replay.conftest import FAKES, cmd_table
from tests.replay.test_eval import build_case, build_operator
from tests.support import Society, run_cli, set_seat

TRACE = "# a session\n\nWe rushed the mortar and it cracked; let it cure overnight.\n"


def backpass_case(folder: Path) -> None:
    (folder / "traces").mkdir(parents=True)
    (folder / "traces" / "t1.md").write_text(TRACE)
    (folder / "public").mkdir()
    (folder / "public" / "memory.md").write_text("- a public lesson\n")
    (folder / "private").mkdir()
    (folder / "private" / "memory.md").write_text("- a private lesson\n")
    (folder / "case.toml").write_text(
        'kind = "backpass"\ntraces = "traces"\npublic = "public"\nprivate = "private"\n'
        '[expect]\nlessons = ["cure"]\n'
    )


def never_in(log: Path, secret: str) -> None:
    """What a seat was given holds no byte of `secret` (asserted without printing it)."""
    text = log.read_text() if log.exists() else ""
    leaked = secret in text
    assert not leaked, f"the secret reached a seat's prompt (see {log})"


@pytest.mark.parametrize(
    ("place", "target"),
    [("traces/t2.md", "secrets/post-secret"), ("private/notes.md", "memory/private/memory.md")],
    ids=["trace-to-secret", "memory-to-private-memory"],
)
def test_a_backpass_case_linking_out_is_refused_and_no_prompt_holds_it(
    tmp_path: Path, place: str, target: str
) -> None:
    operator = Society(tmp_path / "home")
    private = operator.root / "memory" / "private" / "memory.md"
    private.parent.mkdir(parents=True)
    private.write_text("- the operator's private lesson: canary-9f2c\n")
    prompts = tmp_path / "prompts.jsonl"
    set_seat(
        operator.root,
        "fake",
        cmd_table(FAKES / "expedition_model.py", {"FAKE_MODEL_LOG": str(prompts)}),
    )
    suite = tmp_path / "suite"
    backpass_case(suite / "leaky")
    os.symlink(operator.root / target, suite / "leaky" / place)
    done = run_cli(operator.root, "eval", str(suite), "--seat", "fake", "--json", timeout=400)
    never_in(prompts, (operator.root / target).read_text().strip())  # the bulk seat's prompts
    assert done.returncode == 2, done.stdout + done.stderr[-2000:]
    assert str(suite / "leaky" / place) in done.stderr, done.stderr
    assert "does not follow links out" in done.stderr and "Traceback" not in done.stderr


def test_a_build_case_whose_repo_links_to_the_read_token_is_refused(tmp_path: Path) -> None:
    """`repo/helpers.py` is a link to the operator's read token: the eval refuses the case,
    naming the link, before any seat is asked; the code seat's prompts never hold it."""
    log = tmp_path / "coder.jsonl"
    operator = build_operator(tmp_path, log)
    suite = tmp_path / "suite"
    build_case(suite, "adds", "def test_nothing():\n    pass\n")
    link = suite / "adds" / "repo" / "helpers.py"
    os.symlink(operator.root / "secrets" / "read-token", link)
    done = run_cli(operator.root, "eval", str(suite), "--seat", "fake", "--json", timeout=400)
    never_in(log, (operator.root / "secrets" / "read-token").read_text().strip())
    assert done.returncode == 2, done.stdout + done.stderr[-2000:]
    assert str(link) in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("fence", ["guarded", "strict"])
def test_a_code_seat_cannot_read_the_hidden_acceptance_tests(tmp_path: Path, fence: str) -> None:
    """A cmd code seat that goes looking for the suite's acceptance tests (it knows where they
    lie) reads nothing of them, behind either seat fence; the case still runs to green and is
    judged by them after the grind."""
    operator = Society(tmp_path / "home")
    set_build(operator.root, seat_fence=fence)
    solution = tmp_path / "solution"
    solution.mkdir()
    (solution / "calc.py").write_text(PY_FIX)
    seen = tmp_path / "seen"
    seen.mkdir()
    log = seen / "coder.jsonl"
    suite = tmp_path / "suite"
    marker = "acceptance-canary-41d7"
    build_case(
        suite, "adds", f"from calc import add\n\ndef test_{marker.replace('-', '_')}():\n"
        "    assert add(40, 2) == 42\n",
    )  # fmt: skip
    hidden = suite / "adds" / "hidden" / "test_accept.py"
    where = tmp_path / "where.txt"
    where.write_text(str(hidden))
    coder_seat(
        operator.root, "pyfix", "look", writable=[str(seen)], FAKE_CODER_READ=str(where),
        FAKE_CODER_SOLUTION=str(solution), FAKE_CODER_LOG=str(log),
    )  # fmt: skip
    set_seat(operator.root, "fake", cmd_table(FAKES / "expedition_model.py", {}))
    done = run_cli(operator.root, "eval", str(suite), "--seat", "fake", "--json", timeout=400)
    assert log.exists(), done.stdout + done.stderr[-2000:]  # the seat was asked
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    looks = [line["read"] for line in lines if "read" in line]
    assert looks, done.stdout + done.stderr[-2000:]
    for read in looks:  # what the seat read at that path: nothing of the tests
        assert marker.replace("-", "_") not in read and read.startswith("unreadable"), read[:300]
    assert hidden.read_text().startswith("from calc")  # the suite's own copy is untouched
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    (result,) = json.loads(done.stdout)["seats"][0]["results"]
    assert result["passed"] is True and result["failed_gates"] == [], result


BOMBS = {  # each under the 64 KiB bound of a case file: refused by its nesting, not its size
    "arrays": "x = " + "[" * 30_000 + "]" * 30_000 + "\n",
    "inline-tables": "x = " + "{a=" * 12_000 + "1" + "}" * 12_000 + "\n",
    "dotted-key": "x" + ".x" * 10_000 + " = 1\n",
}


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_a_nesting_bomb_case_is_refused_with_the_reason(tmp_path: Path, bomb: str) -> None:
    """30,000 nested arrays, 12,000 inline tables, a key of 10,000 dots: tomllib recurses
    (a RecursionError traceback) or takes quadratic time and memory; the eval refuses the case by
    its nesting, exit 2, naming the file, quickly."""
    operator = Society(tmp_path / "home")
    suite = tmp_path / "suite"
    (suite / "bomb").mkdir(parents=True)
    (suite / "bomb" / "case.toml").write_text(
        'kind = "backpass"\ntraces = "t"\npublic = "p"\n' + BOMBS[bomb]
    )
    started = time.monotonic()
    done = run_cli(operator.root, "eval", str(suite), timeout=120)
    took = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert str(suite / "bomb" / "case.toml") in done.stderr and "levels deep" in done.stderr
    assert took < 30, took


def test_a_case_file_over_its_bound_is_refused_unread(tmp_path: Path) -> None:
    operator = Society(tmp_path / "home")
    case = tmp_path / "suite" / "huge" / "case.toml"
    case.parent.mkdir(parents=True)
    with open(case, "wb") as handle:
        handle.truncate(1024**3)  # 1 GiB, sparse
    done = run_cli(operator.root, "eval", str(tmp_path / "suite"), timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert str(case) in done.stderr and "over the bound of 64 KiB" in done.stderr

"""bench/quick.py runs every benchmark's --quick mode in CI: none may be left out of it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from bench.quick import BENCHES, HELPERS
from bench.table import goal_exit

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_every_bench_is_run_by_quick() -> None:
    """A bench/*.py with a main() that is not a helper program is in bench/quick.py's list."""
    benches = {
        path.stem
        for path in BENCH.glob("*.py")
        if path.stem not in HELPERS and re.search(r"^def main\(", path.read_text(), re.M)
    }
    assert benches == set(BENCHES), f"bench/quick.py's BENCHES differs: {benches ^ set(BENCHES)}"


# Runs each listed bench's own __main__ with --help, one after another in one interpreter:
# sixteen interpreters each importing the room and httpx took 9 s of the suite.
HELP_EACH = """
import contextlib, io, runpy, sys
for path in sys.argv[1:]:
    out = io.StringIO()
    sys.argv = [path, "--help"]
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        code = "no exit"
    except SystemExit as done:
        code = done.code
    print(f"=== {path} {code}")
    print(out.getvalue())
"""


def test_every_listed_bench_has_a_quick_mode() -> None:
    """Each listed bench takes --quick (argparse says so in its help), so CI can run it small."""
    paths = [str(BENCH / f"{name}.py") for name in BENCHES]
    done = subprocess.run(
        [sys.executable, "-c", HELP_EACH, *paths], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    helps = dict(
        (section.split("\n", 1)[0], section.split("\n", 1)[1])
        for section in done.stdout.split("=== ")[1:]
    )
    for name, path in zip(BENCHES, paths, strict=True):
        assert f"{path} 0" in helps, f"bench/{name}.py --help failed:\n{done.stdout}{done.stderr}"
        assert "--quick" in helps[f"{path} 0"], f"bench/{name}.py has no --quick mode"


def test_quick_refuses_an_unknown_name() -> None:
    """A mistyped bench name is exit 2 with the names to choose from, not a silent pass."""
    done = subprocess.run(
        [sys.executable, str(BENCH / "quick.py"), "rooom"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "unknown bench rooom" in done.stderr and "room" in done.stderr


def test_a_quick_run_never_fails_on_its_figures() -> None:
    """CI runs every bench --quick on a busy machine: a missed goal fails only a full run.

    bench/foreman_junk.py --quick once failed CI on a ratio of three 115 ms runs.
    """
    assert goal_exit(met=False, quick=True) == 0
    assert goal_exit(met=False, quick=False) == 1
    assert goal_exit(met=True, quick=False) == 0

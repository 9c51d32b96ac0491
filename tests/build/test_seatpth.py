"""A guarded seat cannot plant code the next `bullpen` command runs: its interpreter is read-only.

Python runs every `.pth` file in site-packages at start-up, before bullpen's own
code, unfenced. A guarded seat (the default seat fence: the filesystem as its user
has it) once wrote one into the virtualenv bullpen runs from. Here bullpen runs
from a fresh virtualenv of its own (its packages reached through a `.pth` of the
test's): a real grinder process on that interpreter gives a real `cmd` seat its
turn, the seat writes a `.pth` into that virtualenv's site-packages, and a real
`bullpen` command runs afterwards with a marker the `.pth` would write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from agents.build.fence import BWRAP, choose
from tests.build.helpers import set_build
from tests.support import Society, set_seat

FENCE = choose("auto")
PLANT = (
    "import os; os.environ.get('PTH_MARKER') and open(os.environ['PTH_MARKER'], 'a').write('ran')\n"
)
SEAT = """\
import os, pathlib, sys
target = pathlib.Path(os.environ["PTH_TARGET"])
try:
    target.write_text({plant!r})
except OSError as exc:
    print("refused:", exc.strerror, file=sys.stderr)
    sys.exit(1)
"""
# The grinder's side: one guarded turn of the seat, in a process on the virtualenv's python.
TURN = """\
import asyncio, json, sys
from pathlib import Path
from agents.build.codeseat import take_turn
from agents.build.config import BuildConfig
from agents.build.fence import choose
from agents.build.runs import Workspace
from agents.home import Home
from agents.privateplaces import fence_hidden
home, builds = Home(Path(sys.argv[1])), Path(sys.argv[2])
clone, cache = builds / "grind-pth", builds / "grind-pth.cache"
clone.mkdir(); cache.mkdir()
space = Workspace(clone, cache, choose("auto"), fence_hidden(home))
config = BuildConfig(root=str(builds), alias=sys.argv[3])
extra = {"BULLPEN_SPEC": "test_x.py", "BULLPEN_TIER": "planter", "BULLPEN_ITERATION": "1"}
turn = asyncio.run(take_turn(home, "py", "planter", space, "step: code\\n", extra, config))
print(json.dumps({"ok": turn.ok, "fatal": turn.fatal, "fence": turn.fence,
                  "problem": turn.problem, "prefix": sys.prefix}))
"""


def _venv(where: Path) -> Path:
    """A virtualenv of its own, reaching the test's packages through a `.pth`: its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    (Path(purelib) / "bullpen-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_a_guarded_seat_cannot_plant_a_pth_the_next_bullpen_runs(tmp_path: Path) -> None:
    society = Society(tmp_path / "home")
    builds = tmp_path / "builds"
    builds.mkdir()
    set_build(society.root, root=str(builds), alias=str(tmp_path / "alias"))
    python = _venv(tmp_path / "venv")
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())  # fmt: skip
    planted, marker = site / "zz-planted.pth", tmp_path / "pth-ran"
    script = tmp_path / "planter.py"
    script.write_text(SEAT.format(plant=PLANT))
    set_seat(society.root, "planter", f'kind = "cmd"\ncommand = ["{sys.executable}", "{script}"]\n'
             f'env = {{ PTH_TARGET = "{planted}" }}')  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(Path.cwd()))}
    done = subprocess.run(
        [str(python), "-c", TURN, str(society.root), str(builds), str(tmp_path / "alias")],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    turn = json.loads(done.stdout.strip().splitlines()[-1])
    assert turn["prefix"] == str(tmp_path / "venv")  # the grinder ran on the virtualenv
    after = subprocess.run(
        [str(python), "-m", "agents.cli", "--home", str(society.root), "trust", "check"],
        capture_output=True, text=True, timeout=60, env={**env, "PTH_MARKER": str(marker)},
    )  # fmt: skip
    if FENCE != BWRAP:  # no sandbox here: the seat ran unfenced, and the turn says so
        assert turn["fence"] == "none"
        return
    assert turn["fence"] == BWRAP  # guarded, the default
    assert not turn["ok"] and turn["fatal"], turn
    assert "tried to write outside the clone" in turn["problem"]
    assert "Read-only file system" in turn["problem"]
    assert not planted.exists()
    assert not marker.exists(), after.stdout + after.stderr  # the next bullpen ran nothing

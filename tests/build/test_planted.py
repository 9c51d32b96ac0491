"""A git filter planted in the grind's clone never runs outside the fence: real builds.

A real hub, foreman and step lurkers, real git and the real fence. The planted
filter would append the home's secret to a marker outside the clone when the
grinder's own `git add` ran it. It is planted twice: by a code seat (a cmd seat's
program writes `.git/config` and `.gitattributes` in the clone) and by the code
under test (a spec whose test writes them when the fenced run imports it). Each
time the grind ends red with a flag naming the planted key, the marker never
appears, and the clone's `.git` is moved aside so a reviewer's git cannot run it.
(The clone has no `.git` of its own: its git directory is kept beside it,
agents/git/apart.py; a planter makes one, and that is refused too.)
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents.build.builddir import clone, prepare
from agents.build.config import BuildConfig
from agents.build.fence import choose
from agents.build.grind import GrindJob, grind
from agents.build.routing import by_name
from agents.build.runs import Workspace, run_spec
from room.errors import StepFailed
from tests.build.helpers import PY_SPEC, run_build, set_build, start_lurkers, ticket
from tests.support import Society, set_seat

NICKS = ("foreman", "sandbox", "testdesigner", "py")
pytestmark = pytest.mark.timeout(400)

# The filter: the home's secret, appended to a marker outside the clone.
PLANT = """\
import pathlib, sys
top = pathlib.Path({top})
command = "cat {secret} >> {marker}; cat"
(top / ".git").mkdir(exist_ok=True)
with open(top / ".git" / "config", "a") as config:
    config.write('[filter "x"]\\n\\tclean = ' + command + '\\n')
(top / ".gitattributes").write_text("* filter=x\\n")
(top / "calc.py").write_text("def add(a, b):\\n    return 0\\n")
"""


@dataclass
class Bench:
    society: Society
    base: Path
    builds: Path
    secret: str
    marker: Path

    def run(self, text: str, wait: float = 180) -> tuple[str, dict[str, Any], str]:
        """Post a build as `bullpen build` does; (the final body, its data, the thread)."""
        return run_build(self.society, text, wait, "planted")

    def campaign(self, slug: str, files: dict[str, str]) -> Path:
        folder = self.builds / slug
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
        return folder


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    base = tmp_path_factory.mktemp("planted")
    society = Society(base / "home")
    society.start_hub()
    builds = base / "builds"
    builds.mkdir()
    outside = base / "outside"
    outside.mkdir()
    marker = outside / "marker"
    secret_file = society.root / "secrets" / "post-secret"
    set_build(society.root, root=str(builds), alias=str(base / "sandbox"), max_iterations=2)
    seat = base / "plant_seat.py"
    seat.write_text(
        PLANT.format(top="'.'", secret=secret_file, marker=marker)  # the clone is its cwd
    )
    set_seat(
        society.root,
        "plant",
        f'kind = "cmd"\ncommand = ["{sys.executable}", "{seat}"]\ntimeout_s = 60',
    )
    set_seat(society.root, "dud", f'kind = "cmd"\ncommand = ["{sys.executable}", "-c", "0"]')
    start_lurkers(society, NICKS)
    try:
        yield Bench(society, base, builds, secret_file.read_text().strip(), marker)
    finally:
        society.stop_all()


def _defused(bench: Bench, before: set[Path]) -> Path:
    """The grind's clone of this build: its .git moved aside, nothing left for git to run."""
    made = set(bench.builds.glob("grind-*")) - before
    (clone,) = {path for path in made if path.suffix not in (".cache", ".git")}
    assert not (clone / ".git").exists()
    (moved,) = clone.glob(".git-refused-*")
    assert "clean = cat " in (moved / "config").read_text()  # kept for the reviewer to read
    return clone


def _nothing_ran(bench: Bench, thread: str) -> None:
    assert not bench.marker.exists(), "the planted filter ran outside the fence"
    room = "\n".join(str(m) for m in bench.society.lines() if m.get("thread") == thread)
    assert bench.secret not in room


def test_a_filter_planted_by_a_code_seat_never_runs(bench: Bench) -> None:
    """The seat writes the filter into the clone's .git/config and .gitattributes; the
    grinder's git never runs it: GRIND FAILED names filter.x.clean and the seat."""
    folder = bench.campaign("seatplant", {"tests/test_calc.py": PY_SPEC})
    before = set(bench.builds.glob("grind-*"))
    body, data, thread = bench.run(
        ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="plant")
    )
    _nothing_ran(bench, thread)
    assert body.startswith(
        "[GRIND FAILED — the clone's git config sets filter.x.clean (planted by code seat "
        "plant, in .git/config); nothing was run."
    ), body
    assert data["green"] is False and data["failed_step"] == "GRIND"
    _defused(bench, before)
    assert not (folder / ".gitattributes").exists()  # the build dir never saw it


SPEC_THAT_PLANTS = (
    "import pathlib\n\n"
    "def _plant():\n"
    "    top = pathlib.Path(__file__).resolve().parent.parent\n"
    "{body}\n\n"
    "_plant()\n\n\n"
    "def test_add():\n"
    "    import calc\n"
    "    assert calc.add(2, 3) == 5\n"
)


def test_a_filter_planted_by_the_code_under_test_never_runs(bench: Bench) -> None:
    """The spec's own code, run behind the fence, writes the filter into the clone's git
    metadata; the grind checks the clone after the run: GRIND FAILED names the key."""
    plant = PLANT.format(top="top", secret=bench.society.root / "secrets/post-secret",
                         marker=bench.marker)  # fmt: skip
    body = "\n".join("    " + line for line in plant.splitlines()[2:-1])  # the writes only
    spec = SPEC_THAT_PLANTS.format(body=body)
    folder = bench.campaign("specplant", {"tests/test_calc.py": spec})
    before = set(bench.builds.glob("grind-*"))
    text = ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="dud", targets="calc.py")
    body, data, thread = bench.run(text)
    _nothing_ran(bench, thread)
    assert body.startswith(
        "[GRIND FAILED — the clone's git config sets filter.x.clean (planted by the code "
        "under test, in .git/config); nothing was run."
    ), body
    assert data["green"] is False
    _defused(bench, before)


# --- the grind itself, in-process, under both seat fences -------------------------------

# Point a `.git` in the clone at a memory repository, so a git reading it would commit there.
GONE = "open('.git', 'w').write('gitdir: ' + {target!r})\nopen('calc.py', 'w').write('x = 1\\n')\n"
COMMONDIR = (
    "import os\nos.mkdir('.git')\n"
    "open('.git/commondir', 'w').write({target!r})\nopen('calc.py', 'w').write('x = 1\\n')\n"
)
LINK = "import os\nos.symlink({target!r}, '.git')\nopen('calc.py', 'w').write('x = 1\\n')\n"
SEATS = {"gone": GONE, "commondir": COMMONDIR, "link": LINK}
HELD = "), which bullpen's git never reads: its own repository is kept where the fenced side "
SAYS = {
    "gone": f"the clone's work tree holds git metadata (.git (a gitdir file){HELD}cannot write "
    "it (planted by code seat gone, in .git)",
    "commondir": f"the clone's work tree holds git metadata (.git/commondir{HELD}cannot write "
    "it (planted by code seat commondir, in .git)",
    "link": f"the clone's work tree holds git metadata (.git (a link){HELD}cannot write it "
    "(planted by code seat link, in .git)",
}


@pytest.mark.parametrize(
    ("seat_fence", "seat"),
    [
        ("guarded", "plant"),
        ("strict", "plant"),
        ("strict", "gone"),
        ("guarded", "commondir"),
        ("guarded", "link"),
    ],
)
def test_the_grind_stops_under_either_seat_fence(
    tmp_path: Path, seat_fence: str, seat: str
) -> None:
    """The grind's own check after a seat turn, under guarded and strict alike: a planted
    filter is named and never runs; a `.git` the seat made in the clone (a gitdir file, a
    commondir, a link to a memory repository) stops the grind too, and nothing is written
    to the memory repository."""
    society = Society(tmp_path / "home")
    builds, marker = tmp_path / "builds", tmp_path / "outside" / "marker"
    builds.mkdir()
    marker.parent.mkdir()
    secret = society.root / "secrets" / "post-secret"
    script = tmp_path / "seat.py"
    memory = society.root / "memory" / "public"
    memory.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(memory)], check=True)
    (memory / "memory.md").write_text("- a lesson\n")
    subprocess.run(["git", "-C", str(memory), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(memory), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "lessons"], check=True)  # fmt: skip
    heads = sorted(p.read_text() for p in (memory / ".git" / "refs" / "heads").iterdir())
    if seat == "plant":
        script.write_text(PLANT.format(top="'.'", secret=secret, marker=marker))
    else:
        script.write_text(SEATS[seat].format(target=str(memory / ".git")))

    set_seat(society.root, seat, f'kind = "cmd"\ncommand = ["{sys.executable}", "{script}"]')
    config = BuildConfig(root=str(builds), alias=str(tmp_path / "sandbox"), seat_fence=seat_fence)
    python = by_name("python")
    folder = builds / "campaign"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_calc.py").write_text(PY_SPEC)
    prepared = prepare(config, folder, python, "tests/test_calc.py", ["calc.py"])
    target = clone(config, folder)
    cache = target.with_name(target.name + ".cache")
    cache.mkdir()
    space = Workspace(target, cache, choose("auto"), (society.root.resolve(),))
    job = GrindJob(
        home=society.home, nick="py", config=config, language=python, build_dir=folder,
        baseline=prepared.baseline, space=space, spec_relative="tests/test_calc.py",
        tiers=[seat], ticket={"problem": "add", "traps": "", "constraints": ""},
    )  # fmt: skip

    async def announce(data: dict[str, Any], output: str) -> None:
        raise AssertionError(f"no iteration may be announced: {data}")

    async def climb() -> None:
        first = await run_spec(config, python, space, "tests/test_calc.py", PY_SPEC)
        await grind(job, first, PY_SPEC, announce)

    with pytest.raises(StepFailed) as failed:
        asyncio.run(climb())
    assert not marker.exists(), "the planted filter ran outside the fence"
    assert sorted(p.read_text() for p in (memory / ".git" / "refs" / "heads").iterdir()) == heads
    if seat in SAYS:
        assert failed.value.message.startswith(f"{SAYS[seat]}; nothing was run"), failed.value
    else:
        assert failed.value.message.startswith(
            "the clone's git config sets filter.x.clean (planted by code seat plant, in "
            ".git/config); nothing was run."
        )
        assert not (target / ".git").exists() and list(target.glob(".git-refused-*"))

"""Under the guarded seat fence, a code seat can write no place of the bullpen.

A real `cmd` seat's program, run behind bwrap as a grind turn runs it, tries to
append to society.toml, to room/room.jsonl, and to the `.git/config` of a memory
repository in the home and of one configured outside it ([backpass] private).
Every append fails read-only and every file keeps its bytes, while the clone
stays writable. Where bubblewrap cannot run, the test says so and checks the
fallback is named as unfenced.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agents.build.codeseat import SEAT_UNFENCED, take_turn
from agents.build.config import BuildConfig
from agents.build.fence import BWRAP, choose
from agents.build.homeplaces import bullpen_places
from agents.build.runs import Workspace
from tests.build.helpers import set_build
from tests.support import Society, set_seat

FENCE = choose("auto")

APPEND = """\
import json, os, sys
done = {}
for target in json.load(open(os.environ["TARGETS"])):
    try:
        with open(target, "a") as handle:
            handle.write("\\n# planted by a code seat\\n")
        done[target] = "appended"
    except OSError as exc:
        done[target] = exc.strerror
open("append.json", "w").write(json.dumps(done))
"""


def _set_backpass(root: Path, key: str, value: str) -> None:
    """Point one [backpass] path of the home elsewhere."""
    path = root / "society.toml"
    text, count = re.subn(rf'^{key} = "memory/{key}"$', f'{key} = "{value}"', path.read_text(),
                          count=1, flags=re.M)  # fmt: skip
    assert count == 1
    path.write_text(text)


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def test_a_guarded_seat_cannot_append_to_the_bullpen(tmp_path: Path) -> None:
    """society.toml, the room and both memory repositories' config keep their bytes."""
    society = Society(tmp_path / "home")
    root = society.root
    builds = tmp_path / "builds"
    builds.mkdir()
    set_build(root, root=str(builds), alias=str(tmp_path / "sandbox"))
    outside = _repo(tmp_path / "private-memory")
    _set_backpass(root, "private", str(outside))
    _repo(root / "memory" / "public")
    room = root / "room" / "room.jsonl"
    room.parent.mkdir(exist_ok=True)
    room.touch()
    targets = [
        root / "society.toml",
        room,
        root / "memory" / "public" / ".git" / "config",
        outside / ".git" / "config",
    ]
    listed = tmp_path / "targets.json"
    listed.write_text(json.dumps([str(t) for t in targets]))
    script = tmp_path / "append.py"
    script.write_text(APPEND)
    set_seat(
        root,
        "appender",
        f'kind = "cmd"\ncommand = ["{sys.executable}", "{script}"]\ntimeout_s = 30\n'
        f'env = {{ TARGETS = "{listed}" }}',
    )
    before = {t: t.read_bytes() for t in targets}
    assert outside.resolve() in bullpen_places(society.home)  # outside the home, still named
    clone = builds / "grind-seathome"
    cache = builds / "grind-seathome.cache"
    clone.mkdir()
    cache.mkdir()
    space = Workspace(clone, cache, FENCE, (root.resolve(),))
    build = BuildConfig(root=str(builds), alias=str(tmp_path / "sandbox"))
    extra = {"BULLPEN_SPEC": str(clone / "test_x.py"), "BULLPEN_TIER": "appender",
             "BULLPEN_ITERATION": "1"}  # fmt: skip
    turn = asyncio.run(
        take_turn(society.home, "py", "appender", space, "step: code\n", extra, build)
    )
    assert turn.ok, turn.problem
    done = json.loads((clone / "append.json").read_text())  # the clone stays writable
    if FENCE != BWRAP:
        assert turn.fence == SEAT_UNFENCED  # the fallback fences no write, and says so
        return
    assert turn.fence == BWRAP  # guarded: the default seat fence
    # society.toml is read-only; the room and the memory repositories are private places,
    # hidden (agents/privateplaces.py): the room is /dev/null read-only, a repository empty
    hidden = "No such file or directory"
    says = ["Read-only file system", "Permission denied", hidden, hidden]
    assert done == {str(t): said for t, said in zip(targets, says, strict=True)}
    assert {t: t.read_bytes() for t in targets} == before


@pytest.mark.parametrize("missing", ["room", "backpass"])
def test_bullpen_places_are_the_existing_ones(tmp_path: Path, missing: str) -> None:
    """A place that does not exist is not bound (bwrap could not), and none nests another."""
    society = Society(tmp_path / "home")
    if missing == "backpass":
        _set_backpass(society.root, "public", str(tmp_path / "nowhere"))
    places = bullpen_places(society.home)
    assert places[0] == society.root.resolve()
    assert all(place.exists() for place in places)
    assert not any(a != b and a in b.parents for a in places for b in places)

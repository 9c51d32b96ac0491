"""Git metadata written into a grind's work tree is data, never the grinder's repository.

A real hub, foreman and step lurkers, real git, the real fence (bwrap where it works),
`[build] seat_fence = "strict"`. tests/fakes/git_planter.py writes one variant of hostile
git metadata into the clone, as a code seat and from the code under test during the
fenced run: an index whose entries climb out of the work tree to a canary and to the
home's secret, a nested `sub/.git` gitdir file pointing at a private memory repository
(a gitlink), `objects/info/alternates` naming that repository with the branch rewritten
to its commit, and replace refs plus grafts swapping the clone's history for it. Each
planter also writes the fix, so a grinder that trusts what was planted goes GREEN.

After each build: the final report is a GRIND FAILED flag naming what was planted and
who planted it; no byte of the canary, the secret or the memory repository (its file's
name or text) is in any object of the grinder's repository, in any prompt a seat was
given, or in the room; no tree there holds a gitlink or a path out; the planted `.git`
is moved aside, so an operator's git in the clone finds nothing to run.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents.build.builddir import clone, prepare
from agents.build.codeseat import SEAT_STRICT, SEAT_UNFENCED, CodeTurn, take_turn
from agents.build.config import BuildConfig
from agents.build.fence import BWRAP, RLIMITS, choose
from agents.build.grind import GrindJob, GrindResult, grind
from agents.build.routing import by_name
from agents.build.runs import Workspace, run_spec
from room.errors import StepFailed
from tests.build.helpers import PY_SPEC, run_build, set_build, start_lurkers, ticket
from tests.support import Society, set_seat

NICKS = ("foreman", "sandbox", "testdesigner", "py")
PLANTER = Path(__file__).resolve().parent.parent / "fakes" / "git_planter.py"
VARIANTS = ("index", "gitlink", "alternates", "history")
# What the final flag names, by variant: the planted file bullpen's git would have read.
NAMED = {
    "index": ".git/index",
    "gitlink": "sub/.git",
    "alternates": ".git/objects/info/alternates",
    "history": ".git/info/grafts",
}
pytestmark = pytest.mark.timeout(600)

# The spec's own code plants during the fenced run (no fix: the spec must be red).
SPEC_THAT_PLANTS = (
    "import pathlib\nimport runpy\n\n"
    "_top = pathlib.Path(__file__).resolve().parent.parent\n"
    "runpy.run_path({planter!r})['plant']({variant!r}, _top, {canary!r}, {secret!r}, "
    "{gitdir!r}, {sha!r})\n\n\n"
) + PY_SPEC


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, check=True)
    return done.stdout.decode("utf-8", "replace")


@dataclass
class Bench:
    society: Society
    base: Path
    builds: Path
    prompts: Path
    canary: Path
    memory: Path
    memory_sha: str
    forbidden: dict[str, str]  # what of the outside must reach nowhere, by name

    @property
    def secret(self) -> Path:
        return self.society.root / "secrets" / "post-secret"

    def args(self) -> list[str]:
        """The planter's arguments after TOP."""
        return [str(self.canary), str(self.secret), str(self.memory / ".git"), self.memory_sha]

    def run(self, text: str, wait: float = 240) -> tuple[str, dict[str, Any], str]:
        """Post a build as `bullpen build` does; (the final body, its data, the thread)."""
        return run_build(self.society, text, wait, "gitdir")

    def campaign(self, slug: str, spec: str) -> Path:
        folder = self.builds / slug
        (folder / "tests").mkdir(parents=True)
        (folder / "tests" / "test_calc.py").write_text(spec)
        return folder


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    base = tmp_path_factory.mktemp("gitdir")
    society = Society(base / "home")
    society.start_hub()
    builds, prompts, outside = base / "builds", base / "prompts", base / "outside"
    for folder in (builds, prompts, outside):
        folder.mkdir()
    canary = outside / "canary.txt"
    canary.write_text(f"CANARY-{secrets.token_hex(8)}\n")
    memory = society.root / "memory" / "private-notes"
    memory.mkdir(parents=True)
    name, text = f"private-{secrets.token_hex(6)}.md", f"PRIVATE-{secrets.token_hex(8)}\n"
    (memory / name).write_text(text)
    _git("-C", str(memory), "init", "-q")
    _git("-C", str(memory), "add", "-A")
    _git("-C", str(memory), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "notes")
    sha = _git("-C", str(memory), "rev-parse", "HEAD").strip()
    set_build(society.root, root=str(builds), alias=str(base / "sandbox"), max_iterations=1,
              seat_fence="strict")  # fmt: skip
    secret = (society.root / "secrets" / "post-secret").read_text().strip()
    bench = Bench(society, base, builds, prompts, canary, memory, sha, {})
    bench.forbidden = {
        "the canary's text": canary.read_text().strip(),
        "the home's secret": secret,
        "the memory file's name": name.removesuffix(".md"),
        "the memory file's text": text.strip(),
    }
    for variant in (*VARIANTS, "fix"):
        argv = [sys.executable, str(PLANTER), variant, ".", *bench.args()]
        argv.append(str(prompts / f"{variant}.log"))
        command = ", ".join(f'"{part}"' for part in argv)
        set_seat(
            society.root,
            f"plant-{variant}",
            f'kind = "cmd"\ncommand = [{command}]\ntimeout_s = 60\nwritable = ["{prompts}"]',
        )
    start_lurkers(society, NICKS)
    try:
        yield bench
    finally:
        society.stop_all()


def _grinders_git(bench: Bench, before: set[Path]) -> tuple[Path, Path]:
    """(the build's clone, the git directory the grinder kept its history in)."""
    made = set(bench.builds.glob("grind-*")) - before
    (clone,) = {p for p in made if p.suffix not in (".cache", ".git")}
    apart = clone.with_name(clone.name + ".git")
    return clone, apart if apart.is_dir() else clone / ".git"


def _objects(gitdir: Path) -> bytes:
    """Every object the grinder's repository holds, as git prints it (its own store only)."""
    listed = subprocess.run(
        ["git", "--git-dir", str(gitdir), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
        env={"GIT_NO_REPLACE_OBJECTS": "1", "PATH": "/usr/bin:/bin"},
    )
    return listed.stdout


def _trees(gitdir: Path) -> list[str]:
    """Every entry of every commit's tree: `mode type sha\tpath`."""
    env = {"GIT_NO_REPLACE_OBJECTS": "1", "PATH": "/usr/bin:/bin"}
    commits = subprocess.run(
        ["git", "--git-dir", str(gitdir), "rev-list", "--all"],
        capture_output=True, env=env, check=False,
    ).stdout.decode().split()  # fmt: skip
    entries: list[str] = []
    for commit in commits:
        done = subprocess.run(
            ["git", "--git-dir", str(gitdir), "ls-tree", "-r", "-t", commit],
            capture_output=True, env=env, check=False,
        )  # fmt: skip
        entries += done.stdout.decode("utf-8", "replace").splitlines()
    return entries


def _reached_nothing(bench: Bench, thread: str, gitdir: Path, prompts: list[Path]) -> None:
    objects = _objects(gitdir)
    room = "\n".join(str(m) for m in bench.society.lines() if m.get("thread") == thread)
    shown = "\n".join(p.read_text() for p in prompts if p.exists())
    for what, text in bench.forbidden.items():
        assert text.encode() not in objects, f"{what} is in the grinder's git objects"
        assert text not in room, f"{what} reached the room"
        assert text not in shown, f"{what} reached a seat's prompt"
    entries = _trees(gitdir)
    assert not [e for e in entries if e.startswith("160000")], f"a gitlink was committed: {entries}"
    assert not [e for e in entries if ".." in e.split("\t")[-1]], f"a path out: {entries}"
    assert bench.memory_sha not in room


def _says(body: str, variant: str, who: str) -> None:
    assert body.startswith("[GRIND FAILED — "), body
    assert NAMED[variant] in body and who in body, body
    assert "bullpen's git never reads" in body, body


@pytest.mark.parametrize("variant", VARIANTS)
def test_git_metadata_planted_by_a_strict_code_seat_is_refused(bench: Bench, variant: str) -> None:
    """The seat plants the variant and writes the fix: the grind stops red naming the file
    and the seat, and nothing of the outside reaches the grinder's objects or the room."""
    folder = bench.campaign(f"seat-{variant}", PY_SPEC)
    before = set(bench.builds.glob("grind-*"))
    body, data, thread = bench.run(
        ticket(str(folder), f"{folder}/tests/test_calc.py", tiers=f"plant-{variant}")
    )
    clone, gitdir = _grinders_git(bench, before)
    _reached_nothing(bench, thread, gitdir, [bench.prompts / f"{variant}.log"])
    _says(body, variant, f"code seat plant-{variant}")
    assert data["green"] is False
    assert not (clone / ".git").exists() and not (clone / "sub" / ".git").exists()
    assert list(clone.rglob(".git-refused-*")), "the planted .git was not moved aside"
    assert not (folder / "sub").exists()  # the build dir never saw it


@pytest.mark.parametrize("variant", VARIANTS)
def test_git_metadata_planted_by_the_code_under_test_is_refused(bench: Bench, variant: str) -> None:
    """The spec's own code plants the variant during the fenced run; the seat after it only
    writes the fix (and logs its prompt): the grind stops at the check after the run."""
    spec = SPEC_THAT_PLANTS.format(
        planter=str(PLANTER), variant=variant, canary=str(bench.canary),
        secret=str(bench.secret), gitdir=str(bench.memory / ".git"), sha=bench.memory_sha,
    )  # fmt: skip
    folder = bench.campaign(f"spec-{variant}", spec)
    before = set(bench.builds.glob("grind-*"))
    log = bench.prompts / "fix.log"
    log.unlink(missing_ok=True)
    body, data, thread = bench.run(
        ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="plant-fix", targets="calc.py")
    )
    clone, gitdir = _grinders_git(bench, before)
    _reached_nothing(bench, thread, gitdir, [log])
    _says(body, variant, "the code under test")
    assert data["green"] is False
    assert not (clone / ".git").exists() and not (clone / "sub" / ".git").exists()


# --- with no sandbox, the grinder's own git directory itself ----------------------------

APART = {
    "apart-alternates": "objects/info/alternates would make git read another repository",
    "apart-replace": "refs/replace swaps objects for others",
}


@pytest.mark.parametrize("variant", ["apart-index", *APART])
def test_the_grinders_own_git_directory_is_checked_and_its_index_rebuilt(
    tmp_path: Path, variant: str
) -> None:
    """`[build] fence = "rlimits"`: no sandbox, so the seat can write the git directory
    beside the clone. An index it planted there, both turns, is never used (each commit
    rebuilds it from the grind's last commit and the work tree): the second turn's prompt
    shows the first turn's change and nothing of the canary or the secret, and the grind
    goes green with neither committed. Alternates or a replace ref stop the grind, named."""
    society = Society(tmp_path / "home")
    builds, outside = tmp_path / "builds", tmp_path / "outside"
    builds.mkdir()
    outside.mkdir()
    canary = outside / "canary.txt"
    canary.write_text(f"CANARY-{secrets.token_hex(8)}\n")
    secret = society.root / "secrets" / "post-secret"
    memory = society.root / "memory" / "notes"
    memory.mkdir(parents=True)
    (memory / "notes.md").write_text(f"PRIVATE-{secrets.token_hex(8)}\n")
    _git("-C", str(memory), "init", "-q")
    _git("-C", str(memory), "add", "-A")
    _git("-C", str(memory), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "n")
    sha = _git("-C", str(memory), "rev-parse", "HEAD").strip()
    prompts = tmp_path / "prompts.log"
    argv = [sys.executable, str(PLANTER), variant, ".", str(canary), str(secret),
            str(memory / ".git"), sha, str(prompts)]  # fmt: skip
    set_seat(society.root, "apart", f'kind = "cmd"\ncommand = {json.dumps(argv)}\n'
             'env = { PLANTER_WRONG_FIRST = "1" }')  # fmt: skip
    config = BuildConfig(root=str(builds), alias=str(tmp_path / "sandbox"), fence=RLIMITS,
                         stall_after=3)  # fmt: skip
    python = by_name("python")
    folder = builds / "campaign"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_calc.py").write_text(PY_SPEC)
    prepared = prepare(config, folder, python, "tests/test_calc.py", ["calc.py"])
    target = clone(config, folder)
    assert not (target / ".git").exists()  # the work tree names no repository
    cache = target.with_name(target.name + ".cache")
    cache.mkdir()
    space = Workspace(target, cache, RLIMITS, (society.root.resolve(),))
    job = GrindJob(
        home=society.home, nick="py", config=config, language=python, build_dir=folder,
        baseline=prepared.baseline, space=space, spec_relative="tests/test_calc.py",
        tiers=["apart"], ticket={"problem": "add", "traps": "", "constraints": ""},
    )  # fmt: skip
    announced: list[dict[str, Any]] = []

    async def announce(data: dict[str, Any], output: str) -> None:
        announced.append(data)

    async def climb() -> GrindResult:
        first = await run_spec(config, python, space, "tests/test_calc.py", PY_SPEC)
        return await grind(job, first, PY_SPEC, announce)

    gitdir = space.repo.gitdir
    if variant == "apart-index":
        result = asyncio.run(climb())
        assert result.green and result.iterations == {"apart": 2}, result
        assert [a["files_changed"] for a in announced] == [["calc.py"], ["calc.py"]]
        second = prompts.read_text().split("\n---\n")[1]
        assert "+    return 0" in second  # the first turn's own change, shown
        objects = _objects(gitdir)
        for text in (canary.read_text().strip(), secret.read_text().strip()):
            assert text.encode() not in objects
            assert text not in prompts.read_text()
        assert not [e for e in _trees(gitdir) if ".." in e.split("\t")[-1]]
        return
    with pytest.raises(StepFailed) as failed:
        asyncio.run(climb())
    assert failed.value.message.startswith(
        f"bullpen's own git directory {gitdir} was changed from outside ({APART[variant]}), "
        "so nothing was run"
    ), failed.value.message
    assert failed.value.message.endswith("(found after code seat apart)")
    assert announced == []
    (gitdir / "objects" / "info" / "alternates").unlink(missing_ok=True)  # its own store only
    assert "PRIVATE-" not in _objects(gitdir).decode("utf-8", "replace")


# --- what the fenced side sees of the git directory -------------------------------------

LOOK = (
    "import json, os, pathlib\n"
    "here = pathlib.Path({top}).resolve()\n"
    "gitdir = here.with_name(here.name + '.git')\n"
    "try:\n"
    "    seen = sorted(os.listdir(gitdir))\n"
    "except OSError as exc:\n"
    "    seen = [type(exc).__name__]\n"
    "(here / {name!r}).write_text(json.dumps(seen))\n"
)


@pytest.mark.parametrize("seat_fence", ["guarded", "strict"])
def test_no_fence_shows_the_grinders_git_directory(tmp_path: Path, seat_fence: str) -> None:
    """A cmd seat under either seat fence and the code under test in its run list the git
    directory beside the clone: under bwrap each sees an empty folder where it lies (it holds
    HEAD, config, objects for bullpen's git); with no sandbox the report says so."""
    society = Society(tmp_path / "home")
    builds = tmp_path / "builds"
    builds.mkdir()
    set_seat(society.root, "look", f'kind = "cmd"\ncommand = {json.dumps([sys.executable, "-c", LOOK.format(top="os.getcwd()", name="seat.json")])}')  # fmt: skip
    config = BuildConfig(root=str(builds), alias=str(tmp_path / "sandbox"), seat_fence=seat_fence)
    python = by_name("python")
    folder = builds / "campaign"
    (folder / "tests").mkdir(parents=True)
    spec = LOOK.format(top="__file__ + '/../..'", name="run.json") + "\n\n" + PY_SPEC
    (folder / "tests" / "test_calc.py").write_text(spec)
    prepare(config, folder, python, "tests/test_calc.py", ["calc.py"])
    target = clone(config, folder)
    cache = target.with_name(target.name + ".cache")
    cache.mkdir()
    fence = choose("auto")
    space = Workspace(target, cache, fence, (society.root.resolve(),))

    async def both() -> CodeTurn:
        await run_spec(config, python, space, "tests/test_calc.py", spec)
        return await take_turn(society.home, "py", "look", space, "look", {}, config)

    turn = asyncio.run(both())
    assert {"HEAD", "config", "objects"} <= set(os.listdir(space.repo.gitdir))
    seen = {name: json.loads((target / name).read_text()) for name in ("seat.json", "run.json")}
    if fence == BWRAP:
        assert seen == {"seat.json": [], "run.json": []}, seen
        assert turn.fence in (SEAT_STRICT, BWRAP)
    else:  # no sandbox: the seat runs unfenced, as docs/build.md says
        assert turn.fence == SEAT_UNFENCED

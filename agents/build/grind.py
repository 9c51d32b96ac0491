"""The grind: while the spec is red, ask the next code seat for a change, apply it, rerun.

The ladder is the tier list, floor first. A tier stalls when `stall_after`
iterations in a row bring no new passing test; the next tier takes over
from the current tree. Each tier has `max_iterations` and the whole grind a
wall-clock bound. Every iteration is committed in the clone (so `git log`
there shows the climb) and announced through `announce`, which posts it in
the thread. A seat that deletes or changes the spec, or writes into the
build dir, stops the grind red and is named in the report; one that hangs
or fails counts as an iteration without progress. The fence each program
seat ran behind is in every iteration's data and the result (`seat_fence`).
What each turn is shown, and carries to the next, is agents/build/seatturn.py;
the lessons the grinder was handed reach every code seat's prompt, and the
result names those that did (`lessons`). A focused turn's candidate (agents/build/focus.py)
that leaves the spec no better is rolled back (`rolled_back`), so the next candidate
starts from the same code and is told how the last one did.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.build.codeseat import NO_CODE_SEAT, check_code_seat, code_seat_kind, take_turn
from agents.build.config import BuildConfig
from agents.build.focus import Focus, Region
from agents.build.routing import Language
from agents.build.runs import SpecRun, Workspace, run_spec
from agents.build.seatturn import Carried, own_change, turn_prompt
from agents.git.apart import Tampered, apart_git, commit_tree, defuse
from agents.git.safe import PlantedConfig, git
from agents.seats.tally import Tally
from room.errors import StepFailed

if TYPE_CHECKING:
    from agents.home import Home
    from agents.memory.lessons import Lesson

__all__ = ["GrindJob", "GrindResult", "grind", "ladder"]

Announce = Callable[[dict[str, Any], str], Awaitable[None]]


@dataclass
class GrindJob:
    home: Home
    nick: str
    config: BuildConfig
    language: Language
    build_dir: Path
    baseline: str
    space: Workspace  # the clone, its cache and the fence
    spec_relative: str
    tiers: list[str]
    ticket: dict[str, Any]  # problem, traps, constraints, targets
    lessons: list[Lesson] = field(default_factory=list)  # handed to the grinder on this wake
    head: str = ""  # the grind's last commit in the clone's git directory (first: baseline)


@dataclass
class GrindResult:
    green: bool
    tier: str | None
    passing: int
    total: int
    iterations: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # local tiers, which write no code
    seat_fence: dict[str, str] = field(default_factory=dict)  # tier -> what fenced its program
    lessons: list[str] = field(default_factory=list)  # ids a code seat's prompt carried
    model: dict[str, Any] = field(default_factory=dict)  # Tally.data() of the openai code seats


def ladder(
    home: Home, tiers: list[str], config: BuildConfig
) -> tuple[list[tuple[str, str]], list[str]]:
    """(name, kind) of each code-writing tier, and the local ones skipped; StepFailed when none
    writes code, a tier names no seat, or a cmd seat's settings are wrong (its writable)."""
    writing, skipped = [], []
    for name in tiers:
        try:
            kind = code_seat_kind(home, name)
            if kind == "cmd":
                check_code_seat(home, name, config)
        except Exception as exc:  # a ConfigError: the tier names no seat table
            raise StepFailed(getattr(exc, "message", str(exc))) from None
        (skipped.append(name) if kind == "local" else writing.append((name, kind)))
    if not writing:
        raise StepFailed(NO_CODE_SEAT)
    return writing, skipped


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _text(repo: Path, *args: str) -> str:
    return git(repo, *args)[1].decode("utf-8", "replace").strip()


def _refusal(job: GrindJob, by: str, exc: PlantedConfig) -> StepFailed:
    """The flag of a clone whose work tree offered what bullpen's git may not read or commit;
    every `.git` planted in it is moved aside first, so no git, ours or a reviewer's, reads it."""
    moved = defuse(job.space.folder)
    aside = (
        f" The planted .git was moved to {', '.join(moved)} so no git reads it by accident: "
        "read it, do not run git in it"
        if moved
        else ""
    )
    return StepFailed(
        f"the clone's {exc.planted.what} (planted by {by}, in {exc.planted.place}); "
        f"nothing was run.{aside}"
    )


def _guard(job: GrindJob, by: str) -> None:
    """After anything fenced touched the clone: its work tree holds no `.git` and no driver
    attributes, and bullpen's own git directory beside it is as bullpen left it (HEAD at its
    own last commit). Anything else ends the grind red (StepFailed) with a flag naming what
    and who. Every git call checks again (agents/git/apart.py); this one names who did it."""
    try:
        head = apart_git(job.space.repo, "rev-parse", "--verify", "HEAD")[1].decode().strip()
    except PlantedConfig as exc:
        raise _refusal(job, by, exc) from None
    except Tampered as exc:
        raise StepFailed(f"{exc.message} (found after {by})") from None
    if head != job.head:
        raise StepFailed(
            f"bullpen's own git directory {job.space.repo.gitdir} was changed from outside "
            f"(found after {by}): its HEAD moved off the grind's last commit, so nothing was "
            "committed; run builds under bwrap ([build] fence)"
        )


def _commit(job: GrindJob, message: str, by: str) -> list[str]:
    """Commit the work tree on the grind's last commit, the index rebuilt (agents/git/apart.py);
    the paths changed. A staged gitlink or path out ends the grind like a planted `.git`."""
    try:
        job.head, changed = commit_tree(job.space.repo, job.head, message)
    except PlantedConfig as exc:
        raise _refusal(job, by, exc) from None
    return changed


def _broke_rule(job: GrindJob, spec_digest: str | None, tier: str) -> str | None:
    """Why the seat's turn broke a rule of the grind, or None."""
    spec = job.space.folder / job.spec_relative
    now = _digest(spec)
    if now != spec_digest:
        what = "deleted" if now is None else "changed"
        apart_git(job.space.repo, "checkout", "-q", job.head, "--", job.spec_relative,
                  check=False)  # fmt: skip
        return (
            f"code seat {tier} {what} the spec {job.spec_relative}; the spec is the contract, "
            "so the grind stopped (the spec was restored in the clone)"
        )
    status = _text(job.build_dir, "status", "--porcelain=v2", "--branch").splitlines()
    head = next((line.split()[2] for line in status if line.startswith("# branch.oid ")), "")
    dirty = "\n".join(line for line in status if not line.startswith("#"))
    if dirty or head != job.baseline:
        return (
            f"code seat {tier} wrote outside the clone: the build dir {job.build_dir} changed "
            f"({(dirty.splitlines() or ['a new commit'])[0].strip()}); check it by hand"
        )
    return None


def _rolled_back(
    job: GrindJob, head: str, region: Region, run: SpecRun, lessons: list[str]
) -> Carried:
    """Put the focused function back as it was at `head` (the candidate made the spec no
    better) and commit that; what the next turn is told: how the candidate did."""
    apart_git(job.space.repo, "checkout", "-q", head, "--", region.path, check=False)
    _commit(job, "grind: the last candidate rolled back", "the grind")
    failed = next((line.strip() for line in run.output.splitlines() if line.startswith("E ")), "")
    said = (
        f"your {region.name} left the spec red ({run.passing}/{run.total} passing"
        f"{': ' + failed[:200] if failed else ''}), so it was rolled back; write another"
    )
    return Carried("", said, lessons)


async def grind(job: GrindJob, first: SpecRun, spec_text: str, announce: Announce) -> GrindResult:
    """Climb the ladder from the clone's first run until green, the top, or the clock."""
    seats, skipped = ladder(job.home, job.tiers, job.config)
    result = GrindResult(False, None, first.passing, first.total, skipped=skipped)
    if not job.head:  # the clone's own commit: the baseline, as `git clone` left it
        job.head = job.baseline
    _guard(job, "the code under test")
    if first.green:
        result.green = True
        return result
    deadline = time.monotonic() + job.config.grind_timeout_s
    spec_digest = _digest(job.space.folder / job.spec_relative)
    last, number, carried = first, 0, Carried()
    for tier, kind in seats:
        best, stalled = last.passing, 0
        for _ in range(job.config.max_iterations):
            if time.monotonic() > deadline:
                result.problems.append(
                    f"the grind ran over its {job.config.grind_timeout_s:g} s bound "
                    "([build] grind_timeout_s)"
                )
                return result
            number += 1
            began = time.monotonic()
            extra = {
                "BULLPEN_SPEC": str(job.space.folder / job.spec_relative),
                "BULLPEN_TIER": tier,
                "BULLPEN_ITERATION": str(number),
            }
            prompt, shown = turn_prompt(
                job.space.folder, job.ticket, (job.spec_relative, spec_text),
                (tier, kind, number), last.output, carried, job.lessons, job.config.prompt_tokens,
            )  # fmt: skip
            result.lessons = carried.lessons_shown
            focus = Focus((job.spec_relative, spec_text), last.output, carried.refused, number)
            turn = await take_turn(
                job.home, job.nick, tier, job.space, prompt, extra, job.config, shown, focus
            )
            if turn.fence:
                result.seat_fence[tier] = turn.fence
            if turn.judgment:
                tally = Tally(**result.model)
                tally.add(turn.judgment)
                result.model = tally.data()
            _guard(job, f"code seat {tier}")
            broken = _broke_rule(job, spec_digest, tier)
            message = f"grind: tier {tier}, iteration {number}"
            before, head = last, job.head
            changed = _commit(job, message, f"code seat {tier}")
            change = own_change(job.space.repo, job.head, changed)
            carried = Carried(change, turn.refused, result.lessons)
            tested = time.monotonic()
            last = await run_spec(job.config, job.language, job.space, job.spec_relative, spec_text)
            test_ms = round((time.monotonic() - tested) * 1000, 1)  # the fenced run: a span
            _guard(job, "the code under test")
            no_better = not last.green and last.passing <= before.passing
            rolled = turn.focused is not None and not broken and no_better
            if rolled and turn.focused is not None:  # a candidate no better: the tree goes back
                carried = _rolled_back(job, head, turn.focused, last, result.lessons)
                last = before
            result.iterations[tier] = result.iterations.get(tier, 0) + 1
            result.passing, result.total = last.passing, last.total
            problem = (
                broken
                or turn.problem
                or (f"code seat {tier}: {carried.refused}" if rolled else None)
            )
            await announce(
                {
                    "kind": "grind-iteration",
                    "tier": tier,
                    "iteration": number,
                    "passing": last.passing,
                    "total": last.total,
                    "files_changed": changed,
                    "green": last.green,
                    "fence": last.fence,
                    "test_ms": test_ms,
                    "iteration_ms": round((time.monotonic() - began) * 1000, 1),
                    **({"seat_fence": turn.fence} if turn.fence else {}),
                    **({"rolled_back": True} if rolled else {}),
                    **({"judgment": turn.judgment} if turn.judgment else {}),
                    **({"problem": problem} if problem else {}),
                },
                last.output,
            )
            if problem and problem not in result.problems:
                result.problems.append(problem)
            if broken or turn.fatal:
                return result
            if last.green:
                result.green, result.tier = True, tier
                return result
            if last.passing > best:
                best, stalled = last.passing, 0
            else:
                stalled += 1
                if stalled >= job.config.stall_after:
                    break
    return result

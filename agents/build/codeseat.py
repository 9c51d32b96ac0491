"""The code seats a grind climbs: a program that edits the clone, or a model that answers files.

A tier is the name of a `[seats.<name>]` table. A `cmd` seat is a
headless coding agent (Claude Code, opencode, aider) or any program: it
runs with the clone as its working directory, the prompt on stdin and
BULLPEN_SPEC, BULLPEN_TIER and BULLPEN_ITERATION in its environment; it
edits files there and its exit status counts. Its process group is killed
at its `timeout_s`. Where the grind's fence is bwrap it runs in a sandbox
(agents/build/fence.py) with the network shared, since a coding agent must
reach its model. `[build] seat_fence = "guarded"` (the default) leaves the
filesystem as the user has it but hides every secret and private place
wherever configuration puts it (agents/privateplaces.py) and keeps the build
root, every place of the bullpen and the interpreter bullpen runs on
(agents/build/homeplaces.py: the home, the room, the memory repositories, the
virtualenv and its site-packages) read-only except the clone;
"strict" makes everything read-only but the clone, a scratch TMPDIR and the
seat's `writable` paths, and hides the whole home and every private place. Its environment is the
grinder's with every BULLPEN_* variable and anything pointing at or holding a
secret left out.

An `openai` seat (a model server, directly or through the gateway) answers
numbered-line edits and whole files (agents/build/edits.py) against what
its prompt showed it, held by the server to a schema sized to the seat's
`max_tokens` (agents/build/editschema.py), validated by the judge and applied here all or none,
every path confined to the clone; an answer that does not apply comes back
as `refused`, the next iteration's input. With a budget under FOCUS_TOKENS it is
asked instead for the one function the failing test calls, as a code block
(agents/build/focus.py), which becomes one such edit. The built-in `local` seat writes no code:
a ladder of only local seats fails at once.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.build.config import BuildConfig
from agents.build.edits import EditRefused, apply_answer
from agents.build.editschema import code_answer_for
from agents.build.fence import BWRAP, FenceLimits, run_fenced
from agents.build.focus import (
    CLOSING_FENCE,
    FOCUS_TOKENS,
    SAMPLE_TEMPERATURE,
    Focus,
    Region,
    find_region,
    focus_answer_for,
    focus_prompt,
)
from agents.build.homeplaces import bullpen_places, interpreter_places
from agents.build.runs import Workspace
from agents.build.ticket import OS_TREES, SHARED_AREAS
from agents.privateplaces import private_places, secret_places
from agents.roots import OutsideRoot
from agents.seats import build_seats, make_judge
from agents.seats.registry import parse_seat_table
from agents.seats.request import JudgmentRequest
from agents.seats.tables import CmdSeatConfig, GatewayAccess, OpenAISeatConfig
from room.errors import ConfigError, SeatError
from trust.screen import Screen

if TYPE_CHECKING:
    from agents.home import Home

__all__ = [
    "CODE_TOKENS",
    "SEAT_UNFENCED",
    "CodeTurn",
    "Shown",
    "check_code_seat",
    "code_seat_kind",
    "seat_writable",
    "take_turn",
]

# The most tokens a code or spec answer may take (JudgmentRequest.max_tokens): files are
# long, but a model that runs on must still stop before its seat's timeout.
CODE_TOKENS = 4096
SEAT_UNFENCED = "none"  # the seat fence under [build] fence = "rlimits": it runs as it is
SEAT_STRICT = "bwrap-strict"  # bwrap with [build] seat_fence = "strict"; "bwrap" is guarded
READ_ONLY = "Read-only file system"  # what a write the fence refused fails with
# A seat may write neither the system's trees nor anything under them, nor these folders
# themselves (a folder of its own inside them is the operator's call).
SYSTEM_TREES = tuple(Path(p) for p in OS_TREES)
SYSTEM_FOLDERS = tuple(Path(p) for p in ("/", "/tmp", *SHARED_AREAS))
NO_CODE_SEAT = "no code-writing seat: set tiers or [build] tiers to a model seat, see docs/build.md"


@dataclass(frozen=True)
class CodeTurn:
    """One turn of a code seat: did it finish, and what went wrong if not."""

    ok: bool
    problem: str | None = None
    fatal: bool = False  # the grind must stop (the seat broke a rule), not just climb
    fence: str | None = None  # what fenced the program a cmd seat ran; None: none ran
    refused: str | None = None  # why an openai seat's answer did not apply: its next input
    judgment: dict[str, Any] | None = None  # an openai seat's provenance (attempts, misses)
    focused: Region | None = None  # the function a focused turn replaced (agents/build/focus.py)


def code_seat_kind(home: Home, name: str) -> str:
    """`cmd`, `openai` or `local` for a tier name; ConfigError for a seat that does not exist."""
    table = home.society.seats.get(name)
    if table is None:
        if name == "local":
            return "local"
        known = ", ".join(sorted(home.society.seats)) or "none"
        raise ConfigError(
            f"the tier {name!r} names no [seats.{name}] table (the seats are {known}); add one "
            "(`bullpen docs build`, code seats) or fix the tier's name"
        )
    return parse_seat_table(name, table).kind


def _refusal(place: Path, guarded: dict[str, Path]) -> str | None:
    """Why a seat may not write `place`, or None."""
    if place in SYSTEM_FOLDERS or any(t == place or t in place.parents for t in SYSTEM_TREES):
        return "is a system folder"
    if place == Path.home().resolve():
        return "is your whole home folder"
    for what, guard in guarded.items():
        if place == guard or guard in place.parents or place in guard.parents:
            return f"overlaps {what} {guard}, which a code seat must never write"
    return None


def seat_writable(home: Home, name: str, config: CmdSeatConfig, build_root: Path) -> list[Path]:
    """The seat's `writable` paths, `~` expanded and resolved; ConfigError for one that does
    not exist, or that would open the system, the bullpen home or a build dir to the seat."""
    guarded = {
        "the bullpen home": home.root.resolve(),
        "the build root ([build] root)": build_root.resolve(),
    }
    found = []
    for given in config.writable:
        where = f"[seats.{name}] writable {given!r}"
        path = Path(os.path.expanduser(given))
        if not path.is_absolute():
            raise ConfigError(f"{where} is not an absolute path (an unknown ~user?)")
        if not path.exists():
            raise ConfigError(
                f"{where}: {path} does not exist; create it (mkdir -p {path}) or remove it "
                "from writable"
            )
        for place in dict.fromkeys((Path(os.path.normpath(path)), path.resolve())):
            problem = _refusal(place, guarded)
            if problem:
                raise ConfigError(
                    f"{where} ({place}) {problem}; list only the coding agent's own state "
                    "folders, like ~/.claude (`bullpen docs build`, the fence)"
                )
        found.append(path.resolve())
    return found


@dataclass(frozen=True)
class _Secrets:
    """The home's secret places and its screen, read once: what a seat must not be given."""

    places: list[Path]  # the secrets, which no env value may name
    hidden: list[Path]  # every private place (agents/privateplaces.py), hidden from the seat
    homes: tuple[str, ...]  # under strict, any path into the home (that fence hides it whole)
    screen: Screen

    @classmethod
    def of(cls, home: Home, strict: bool) -> _Secrets:
        every = {str(place) for root in home.homes() for place in (root, root.resolve())}
        homes = (str(home.root), *sorted(every)) if strict else ()
        return cls(secret_places(home), private_places(home), homes, home.screen.screen())

    def given_by(self, value: str) -> str | None:
        """What of the home's `value` gives away, or None."""
        if any(root in value for root in self.homes):
            return "a path in the bullpen home"
        if any(str(place) in value for place in self.places):
            return "a path to the bullpen home's secrets"
        return self.screen.find(value)


def check_code_seat(
    home: Home, name: str, build: BuildConfig, secrets: _Secrets | None = None
) -> list[Path]:
    """A cmd code seat's own settings, checked before a grind clones anything and again at
    each turn: its writable paths (returned), and no env value pointing at the secrets (or,
    under strict, into the home) or holding one. ConfigError says what to fix."""
    config: Any = parse_seat_table(name, home.society.seats[name])
    if not isinstance(config, CmdSeatConfig):
        return []
    writable = seat_writable(home, name, config, build.root_path)
    if secrets is None:
        secrets = _Secrets.of(home, build.seat_fence == "strict")
    for key, value in config.env.items():
        what = secrets.given_by(value)
        if what:
            raise ConfigError(
                f"[seats.{name}] env {key} holds {what}, which a code seat must never see; "
                "copy what it needs outside the home and name that (`bullpen docs build`)"
            )
    return writable


def _seat_env(config: CmdSeatConfig, extra: dict[str, str], secrets: _Secrets) -> dict[str, str]:
    """The grinder's environment minus BULLPEN_* and anything giving the secrets away."""
    base = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("BULLPEN_") and secrets.given_by(value) is None
    }
    return {**base, **config.env, **extra}


def _guarded_readonly(home: Home, build: BuildConfig) -> list[Path]:
    """What a guarded seat may read but not write: the build root (its clone is bound
    writable after), every place of the bullpen, and the interpreter bullpen runs on."""
    return [build.root_path.resolve(), *bullpen_places(home), *interpreter_places()]


async def _cmd_turn(
    home: Home,
    name: str,
    config: CmdSeatConfig,
    space: Workspace,
    prompt: str,
    extra: dict[str, str],
    build: BuildConfig,
) -> CodeTurn:
    strict = build.seat_fence == "strict"
    fence = SEAT_UNFENCED if space.fence != BWRAP else SEAT_STRICT if strict else BWRAP
    secrets = _Secrets.of(home, strict)
    try:
        writable = check_code_seat(home, name, build, secrets)  # a path may have gone since
    except ConfigError as exc:
        return CodeTurn(False, exc.message, fatal=True, fence=fence)
    env = _seat_env(config, extra, secrets)
    if shutil.which(config.command[0], path=env.get("PATH", os.defpath)) is None:
        return CodeTurn(
            False,
            f"cannot start {config.command[0]}: not found (not an executable file, nor on PATH)",
            fatal=True,
            fence=fence,
        )
    scratch = None
    if fence == SEAT_STRICT:  # /tmp is read-only in the sandbox: the seat's own TMPDIR
        scratch = Path(tempfile.mkdtemp(prefix="seat-tmp-", dir=space.cache))
        env = {**env, "TMPDIR": str(scratch)}
        writable = [space.folder, scratch, *writable]
        hidden = [*space.unseen, *secrets.hidden]  # the home, the git dir, what is outside
    else:  # guarded: the user's filesystem, less the secrets and the build root's other dirs
        writable = [space.folder]
        hidden = [*secrets.hidden, space.repo.gitdir]
    try:
        done = await run_fenced(
            config.command,
            cwd=space.folder,
            writable=writable,
            env=env,
            limits=FenceLimits(timeout_s=config.timeout_s),
            fence=space.fence,
            hidden=hidden,
            network=True,
            resource_limits=False,  # the operator's program, not model-written code
            stdin=prompt.encode(),
            open_base=not strict,
            readonly=[] if strict else _guarded_readonly(home, build),
        )
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    if done.timed_out:
        return CodeTurn(
            False,
            f"code seat {name} hung: no exit within {config.timeout_s:g} s, its process group "
            f"was killed (raise [seats.{name}] timeout_s if it needs longer)",
            fence=fence,
        )
    if done.returncode != 0:
        tail = " | ".join(done.output.strip().splitlines()[-3:])[-400:]
        if fence != SEAT_UNFENCED and READ_ONLY in done.output:  # a rule broken, not a slip
            hint = (
                f"list its own state folders in [seats.{name}] writable"
                if strict
                else "it may change nothing under [build] root but its clone"
            )
            return CodeTurn(
                False,
                f"code seat {name} tried to write outside the clone, which its fence keeps "
                f"read-only ({hint}; `bullpen docs build`, the fence), and exited "
                f"{done.returncode}: {tail}",
                fatal=True,
                fence=fence,
            )
        return CodeTurn(False, f"code seat {name} exited {done.returncode}: {tail}", fence=fence)
    return CodeTurn(True, fence=fence)


def _editable(clone: Path, shown: Shown) -> dict[str, str]:
    """The current text of each file the prompt showed in full that the seat may edit."""
    texts = {}
    for path in sorted(shown.files - shown.protected):
        target = clone / path
        if target.is_file() and not target.is_symlink():
            texts[path] = target.read_bytes().decode("utf-8", "replace")
    return texts


async def _openai_turn(
    home: Home,
    nick: str,
    seat: tuple[str, OpenAISeatConfig],
    clone: Path,
    prompt: str,
    shown: Shown,
    focus: Focus | None = None,
) -> CodeTurn:
    name, config = seat
    gateway = None
    if home.has_gateway:
        gateway = GatewayAccess(home.gateway_url(), home.gateway_token_file(nick))
    judge = make_judge(build_seats(home.society.seats, gateway), {"code": name}, home.screen)
    # The answer's budget: the step's, or the seat's own cap when smaller; the schema the
    # server is sent is sized to it, so an answer is never cut off mid-JSON.
    budget = min(CODE_TOKENS, config.max_tokens or CODE_TOKENS)
    editable = _editable(clone, shown)
    region = None
    if focus is not None and budget < FOCUS_TOKENS:  # one function, its test, a code block
        region = find_region(focus.spec, focus.output, editable)
    try:
        if region is not None and focus is not None:
            sampled = focus.iteration > 1  # a later try asks for another answer than the first
            request = JudgmentRequest(
                "code", focus_prompt(region, focus.said), max_tokens=budget,
                structured=False, temperature=SAMPLE_TEMPERATURE if sampled else None,
                seed=focus.iteration if sampled else None, stop=(CLOSING_FENCE,),
            )  # fmt: skip
            told = await judge("code", request, focus_answer_for(region))
            said, answer = told.provenance(), told.answer.as_edit(region)
        else:
            request = JudgmentRequest("code", prompt, max_tokens=budget)
            judgment = await judge("code", request, code_answer_for(editable, budget))
            said, answer = judgment.provenance(), judgment.answer
    except SeatError as exc:
        return CodeTurn(False, f"code seat {name}: {exc.message}")
    try:
        apply_answer(clone, answer, shown.files, shown.protected)
    except OutsideRoot as exc:
        problem = f"code seat {name} wrote outside the clone: {exc.message}"
        return CodeTurn(False, problem, True, judgment=said)
    except EditRefused as exc:
        problem = f"code seat {name}: {exc.message}"
        return CodeTurn(False, problem, refused=exc.message, judgment=said)
    return CodeTurn(True, judgment=said, focused=region)


@dataclass(frozen=True)
class Shown:
    """What the prompt showed in full (editable) and what may never change (the spec)."""

    files: set[str]
    protected: set[str]


async def take_turn(
    home: Home,
    nick: str,
    name: str,
    space: Workspace,
    prompt: str,
    extra: dict[str, str],
    build: BuildConfig,
    shown: Shown | None = None,
    focus: Focus | None = None,
) -> CodeTurn:
    """Ask the code seat `name` for the next change in the clone (`space.folder`), behind the
    grind's fence (`space.fence`, `space.hidden`); an openai seat may edit only `shown`, and
    with a small budget is asked for the function `focus`'s failing test calls."""
    home.screen.check(prompt, f"the prompt for code seat {name}")
    config: Any = parse_seat_table(name, home.society.seats[name])
    if isinstance(config, CmdSeatConfig):
        return await _cmd_turn(home, name, config, space, prompt, extra, build)
    if isinstance(config, OpenAISeatConfig):
        return await _openai_turn(
            home, nick, (name, config), space.folder, prompt, shown or Shown(set(), set()), focus
        )
    return CodeTurn(False, NO_CODE_SEAT, fatal=True)

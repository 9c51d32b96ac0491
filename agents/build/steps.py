"""The build's step agents: @sandbox prepares, @testdesigner checks the spec, grinders grind.

    prepare_dir   @sandbox       the build-dir rules (agents/build/builddir.py)
    design_spec   @testdesigner  the spec exists, parses, and is red against the stub
    grind_spec    @py @godev @jsdev  the tier ladder in a throwaway clone

Each reads its inputs from the foreman's ask and re-checks every path
(the ask is data from a poster). A step that cannot do its work raises
StepFailed, which the lurker posts as a FAILED flag and the foreman reports.
Model-written code runs only behind the fence, and only in a clone: the
red check too runs in a throwaway clone, so the build dir keeps the stub.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from agents.build.builddir import clone, point_alias, prepare, resolve_repo
from agents.build.codeseat import CODE_TOKENS, code_seat_kind
from agents.build.config import BuildConfig
from agents.build.edits import CodeAnswer, EditRefused, apply_answer
from agents.build.fence import choose
from agents.build.grind import GrindJob, grind, ladder
from agents.build.handoff import handed, receive, sees, try_hand_on
from agents.build.prompts import step_memory, testdesign_prompt
from agents.build.repomap import view_repo
from agents.build.routing import Language, by_name, route
from agents.build.runs import SpecRun, Workspace, run_spec, syntax_problem
from agents.git.apart import apart_git, clone_apart
from agents.git.safe import git
from agents.objects import here
from agents.privateplaces import fence_hidden
from agents.roots import OutsideRoot, Roots
from agents.runtime.step import JudgmentRequest, Reply, StepContext
from room.errors import ConfigError, SeatError, SecretFound, StepFailed
from room.message import Message
from room.traceids import parse_traceparent, step_span_id

__all__ = ["design_spec", "grind_spec", "prepare_dir"]


def _config(ctx: StepContext) -> BuildConfig:
    try:
        return BuildConfig.of(ctx.home)
    except ConfigError as exc:
        raise StepFailed(exc.message) from None


def _data(message: Message) -> dict[str, Any]:
    data = dict(message.data or {})
    if "spec_relative" not in data or "repo" not in data:
        raise StepFailed("the ask carries no build; build steps are asked by the foreman")
    return data


def _language(data: dict[str, Any]) -> Language:
    """The spec's language by its path, never by a name in the ask."""
    language = route(str(data["spec_relative"]))
    if language is None or language.name != data.get("language"):
        raise StepFailed(f"no grinder runs the spec {data['spec_relative']}")
    return language


def _build_dir(config: BuildConfig, data: dict[str, Any]) -> Path:
    real = resolve_repo(config, str(data.get("build_dir") or data["repo"]))
    relative = Path(str(data["spec_relative"]))
    if relative.is_absolute() or ".." in relative.parts:
        raise StepFailed(f"the spec path {relative} must lie inside the build dir")
    return real


def prepare_dir(message: Message, ctx: StepContext) -> Reply:
    """Step 2: REPO under the root, the alias pointed at it, scaffolded, baseline named."""
    config, data = _config(ctx), _data(message)
    language = _language(data)
    real = _build_dir(config, data)
    point_alias(config, real)
    done = prepare(
        config, real, language, str(data["spec_relative"]), list(data.get("targets") or [])
    )
    how = "scaffolded" if done.scaffolded else "a git repository"
    stubs = f", stubs {', '.join(done.stubs)}" if done.stubs else ""
    body = f"build dir {real} ({how}{stubs}), alias {config.alias}, baseline {done.baseline[:12]}"
    return Reply(
        body,
        {
            "build_dir": str(real),
            "alias": config.alias,
            "baseline": done.baseline,
            "scaffolded": done.scaffolded,
            "stubs": done.stubs,
            "files": done.files,
        },
    )


def _space(config: BuildConfig, ctx: StepContext, folder: Path) -> Workspace:
    cache = folder.with_name(folder.name + ".cache")
    cache.mkdir(parents=True, exist_ok=True)
    try:
        fence = choose(config.fence)
        hidden = fence_hidden(ctx.home)  # every secret and private place, wherever it lies
    except RuntimeError as exc:
        raise StepFailed(str(exc)) from None
    except ConfigError as exc:
        raise StepFailed(f"the fence cannot tell what to hide: {exc.message}") from None
    return Workspace(folder, cache, fence, hidden)


def _drop(space: Workspace) -> None:
    shutil.rmtree(space.cache, ignore_errors=True)


async def _write_spec(
    ctx: StepContext, config: BuildConfig, real: Path, data: dict[str, Any]
) -> None:
    seat = config.testdesign_seat
    spec = str(data["spec_relative"])
    kind = code_seat_kind(ctx.home, seat) if seat in ctx.home.society.seats else "local"
    if kind == "local":
        raise StepFailed(
            f"there is no spec at {real / spec} and no seat to write one: write the spec "
            f"yourself, or set [seats.{seat}] to a model seat (`bullpen docs build`, code seats)"
        )
    targets = [str(t) for t in data.get("targets") or []]
    view = view_repo(real, spec, "", targets, config.prompt_tokens)
    prompt = testdesign_prompt(data, view, step_memory(ctx.home, data))
    request = JudgmentRequest("testdesign", prompt, max_tokens=CODE_TOKENS)
    try:
        judgment = await ctx.judge(seat, request, CodeAnswer)
    except SeatError as exc:
        raise StepFailed(f"the {seat} seat wrote no spec: {exc.message}") from None
    try:
        apply_answer(real, judgment.answer, set())  # new files only: never the code under test
    except OutsideRoot as exc:
        raise StepFailed(f"the {seat} seat wrote outside the build dir: {exc.message}") from None
    except EditRefused as exc:
        raise StepFailed(f"the {seat} seat's spec was not written: {exc.message}") from None
    if not (real / spec).is_file():
        git(real, "reset", "-q", "--hard", check=False)
        git(real, "clean", "-qfd", check=False)
        raise StepFailed(f"the {seat} seat answered files, but none at the test path {spec}")
    git(real, "add", "-A")
    git(real, "commit", "-q", "-m", f"spec: {spec} (by the {seat} seat)", identity=True)


async def design_spec(message: Message, ctx: StepContext) -> Reply:
    """Step 3: the spec at the test path (the operator's, or the testdesign seat's), checked
    to be collected by its runner and red against the stub; green or uncollectable is flagged."""
    config, data = _config(ctx), _data(message)
    language = _language(data)
    real = _build_dir(config, data)
    spec = str(data["spec_relative"])
    written_by = "operator"
    if not (real / spec).is_file():
        await _write_spec(ctx, config, real, {**data, "language": language.name})
        written_by = config.testdesign_seat
    text = Roots.single("build", real).read_text("build", real / spec, "the spec")
    folder = Path(tempfile.mkdtemp(prefix="spec-check-", dir=os.path.realpath(config.root)))
    shutil.rmtree(folder)
    checked = clone_apart(real, folder)
    space = _space(config, ctx, folder)
    try:
        problem = await syntax_problem(config, language, space, spec)
        if problem is not None:
            raise StepFailed(f"the runner cannot collect the spec: {problem}")
        run = await run_spec(config, language, space, spec, text)
    finally:
        _drop(space)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(checked.gitdir, ignore_errors=True)
    if run.total == 0:
        raise StepFailed(f"the runner collected no tests from {spec}: {_tail(run)}")
    if run.green:
        raise StepFailed(
            f"the spec {spec} is green against the stub ({run.passing}/{run.total}): it tests "
            "nothing the stub lacks; tighten it to the acceptance contract"
        )
    baseline = git(real, "rev-parse", "HEAD")[1].decode().strip()
    # the build dir at this commit, for a grinder on another host (agents/build/handoff.py)
    handoff, unhanded = await try_hand_on(ctx.home, ctx.nick, "spec", real)
    body = f"spec {spec} ({written_by}): red against the stub, {run.passing}/{run.total} passing"
    return Reply(
        body,
        {
            "spec": spec,
            "written_by": written_by,
            "passing": run.passing,
            "total": run.total,
            "red": True,
            "fence": run.fence,
            "baseline": baseline,
            "handoff": handoff,
            **({"handoff_problem": unhanded} if unhanded else {}),
            # the ids the testdesign seat's prompt carried (ctx.judge adds them); none when
            # the operator wrote the spec and no model was asked
            "lessons": [lesson.id for lesson in ctx.lessons] if written_by != "operator" else [],
        },
    )


def _tail(run: SpecRun) -> str:
    return " | ".join(run.output.strip().splitlines()[-3:])[-400:] or "(no output)"


def _announcer(ctx: StepContext, message: Message):  # type: ignore[no-untyped-def]
    async def announce(data: dict[str, Any], output: str) -> None:
        body = (
            f"grind iteration {data['iteration']} (tier {data['tier']}): "
            f"{data['passing']}/{data['total']} passing, {len(data['files_changed'])} files changed"
        )
        payload = {**data, "ask": message.id}
        try:
            ctx.home.screen.check_json({"body": body, "data": payload}, "a grind iteration")
        except SecretFound:
            payload.pop("problem", None)
            payload["files_changed"] = []
        async with ctx.home.client(ctx.nick) as client:
            stored = await client.say(
                f"@{message.from_}", body, type="reply", data=payload, thread=message.thread
            )
        iteration_spans(message, stored)

    return announce


async def _grind_dir(
    ctx: StepContext, config: BuildConfig, data: dict[str, Any], baseline: str
) -> Path:
    """The build dir at its baseline on this host: the one the ask names when this host sees
    it at the baseline (one host: nothing is copied); else the bundle @testdesigner handed on,
    fetched, checked by hash and unpacked under this host's build root."""
    hand = handed(data.get("handoff"))
    try:
        real: Path | None = _build_dir(config, data)
        problem = f"the build dir {real} moved since its baseline {baseline[:12]}"
        if real is not None and sees(real, baseline):
            return real
    except StepFailed as exc:
        real, problem = None, exc.message
    if hand is None or hand["commit"] != baseline:
        why = data.get("handoff_problem") or "it handed on no bundle"
        raise StepFailed(
            f"{problem} (seen by @{ctx.nick} on host {here()}); the spec step could not hand the "
            f"build dir at {baseline[:12]} on ({str(why)[:400]}), so it must be on this host"
        )
    name = re.sub(r"[^A-Za-z0-9._-]", "-", Path(str(data.get("build_dir") or "build")).name)
    dest = Path(os.path.realpath(config.root)) / f"{name or 'build'}-{baseline[:12]}"
    if dest.exists():  # an earlier grind of this baseline on this host unpacked it
        if sees(dest, baseline):
            return dest
        raise StepFailed(
            f"{dest} exists but is not the build dir at {baseline[:12]}; move it away and ask again"
        )
    return await receive(ctx.home, ctx.nick, "grind", hand, dest)


def iteration_spans(ask: Message, stored: dict[str, Any]) -> None:
    """The iteration's span and its fenced test run's, exported live under the grind's step
    when this process exports traces (the ask carries the run's trace context)."""
    from agents.telemetry import live

    exporter = live.installed()
    carried = parse_traceparent((ask.data or {}).get("traceparent"))
    if exporter is None or carried is None or not ask.thread:
        return
    from agents.telemetry.tree import iteration_records

    step = step_span_id(ask.thread, ask.seq)
    for span in iteration_records(stored, ask.thread, carried[0], step):
        exporter.submit(span)


async def grind_spec(message: Message, ctx: StepContext) -> Reply:
    """Step 4: clone, run, and climb the tier ladder until green; the clone is the artifact."""
    config, data = _config(ctx), _data(message)
    language = by_name(_language(data).name)
    spec = str(data["spec_relative"])
    tiers = list(data.get("tiers") or config.standing_tiers())
    ladder(ctx.home, tiers, config)  # a bad ladder fails loud before any clone
    baseline = str(data.get("baseline") or "")
    real = await _grind_dir(ctx, config, data, baseline)
    target = clone(config, real)
    space = _space(config, ctx, target)
    try:
        text = (target / spec).read_text(encoding="utf-8", errors="replace")
        first = await run_spec(config, language, space, spec, text)
        job = GrindJob(
            home=ctx.home,
            nick=ctx.nick,
            config=config,
            language=language,
            build_dir=real,
            baseline=baseline,
            space=space,
            spec_relative=spec,
            tiers=tiers,
            ticket={
                **{k: data.get(k, "") for k in ("problem", "traps", "constraints")},
                "targets": list(data.get("targets") or []),
                "memory": step_memory(ctx.home, data),  # what a fenced seat cannot look up
            },
            lessons=list(ctx.lessons),
        )
        result = await grind(job, first, text, _announcer(ctx, message))
    finally:
        _drop(space)
    # commit to commit, in bullpen's own git directory: nothing of the work tree is read
    diff = apart_git(space.repo, "diff", "--stat", baseline, "HEAD", check=False)[1]
    # the green clone, for `bullpen build` on whatever host it runs (agents/build/artifact.py)
    artifact, unhanded = (
        await try_hand_on(ctx.home, ctx.nick, "grind", space.repo) if result.green else (None, None)
    )
    verdict = "GREEN" if result.green else "RED"
    body = f"grind {verdict}: {result.passing}/{result.total} passing in {target}"
    return Reply(
        body,
        {
            "kind": "grind-result",
            "green": result.green,
            "tier": result.tier,
            "passing": result.passing,
            "total": result.total,
            "iterations": result.iterations,
            "problems": result.problems,
            "skipped": result.skipped,
            "clone": str(target),
            "build_dir": str(real),
            "baseline": baseline,
            "diff_stat": diff.decode("utf-8", "replace").strip(),
            "gitdir": str(space.repo.gitdir),
            "fence": space.fence,
            "seat_fence": result.seat_fence,
            "model": result.model,
            "language": language.name,
            "lessons": result.lessons,  # the ids a code seat was shown, not only handed over
            "memory": [n.id for n in job.ticket["memory"]] if result.iterations else [],
            **({"artifact": artifact} if artifact else {}),
            **({"artifact_problem": unhanded} if unhanded else {}),
        },
    )

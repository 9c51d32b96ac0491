"""The backpass step agents, one nick each: message and context in, reply out.

    tracelister   step 1  the state file checked, pending traces, bullet and ledger ids, the bases
    analyst       step 2  one bulk-seat analysis of one trace (hard timeout)
    quotechecker  step 3  keep the items whose quote is in their trace
    ledgerkeeper  step 4  ledger lines, corroborations, prunes (written to the run folder)
    synthesizer   step 5  one synthesis call, the branches and commits, the state file

Every step reads the run's parameters from its ask (`data["run"]`, see
RunParams) and writes what is too big for the room under the run folder
(`<runs>/<thread>/`), replying with paths and counts. A step that cannot do
its work raises StepFailed; the lurker posts it as a FAILED reply. Only the
synthesizer writes outside the run folder, and never in report-only mode.
The run folder itself is written in every mode: the steps hand each other
their results through it, and it holds the report.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from agents.backpass import chunks, publish, relay, seating
from agents.backpass import ledger as ledgers
from agents.backpass.artifacts import arrive, artifact_bytes, hand_on
from agents.backpass.config import RunParams, run_dir
from agents.backpass.gitwork import RepoInfo, inspect_repo, repos_from, show_file
from agents.backpass.memory import bullets
from agents.backpass.prompts import analysis_request, load_template, unknown_placeholders
from agents.backpass.quotes import check_items
from agents.backpass.schemas import AnalysisAnswer
from agents.backpass.traces import (
    StateFileError,
    TraceChanged,
    TraceTooLarge,
    check_state,
    pending,
    read_snapshot,
    read_trace,
    render,
    scan,
)
from agents.backpass.traces import sha256_bytes as sha256
from agents.roots import OutsideRoot, Roots
from agents.runtime.step import Judgment, JudgmentRequest, Reply, StepContext
from agents.wording import counted
from room.errors import ConfigError, SeatError, StepFailed
from room.message import Message

__all__ = ["analyse", "check_quotes", "keep_ledger", "list_traces", "synthesize"]

# The trace list in the reply; later asks carry it again with a little more per trace, and the
# room allows 256 KiB of data per post.
LIST_BUDGET_BYTES = 96 * 1024
UNCHANGED_NAMED = 200  # unchanged traces named in the funnel; the rest are counted
PREFIX = {"public": "PUB", "private": "PRV"}


def _data(message: Message) -> dict[str, Any]:
    return dict(message.data or {})


def _params(data: dict[str, Any], ctx: StepContext) -> tuple[RunParams, Roots]:
    """The run's parameters from the ask, each path checked against society.toml's roots.

    The ask is data from a poster (a privileged nick may write any ask, through the relaxed
    listener too), so its paths only ever narrow the run to folders under the roots."""
    try:
        params = RunParams.model_validate(data.get("run") or {})
    except ValueError as exc:
        raise StepFailed(f"this ask's data.run is not a backpass run's parameters: {exc}") from None
    try:
        return params, params.confine(ctx.home)
    except ConfigError as exc:
        raise StepFailed(exc.message) from None


def _folder(message: Message, ctx: StepContext, params: RunParams, roots: Roots) -> Path:
    folder = run_dir(params.path(ctx.home, "runs"), message.thread or "no-thread")
    os.close(roots.open_folder("runs", folder, "the run folder"))
    return folder


def _traces(ctx: StepContext, params: RunParams) -> Roots:
    """This run's traces folder as the only place a trace may be read from."""
    return Roots.single("traces", params.path(ctx.home, "traces"))


def write_json(path: Path, value: Any, roots: Roots) -> str:
    roots.write_bytes("runs", path, artifact_bytes(value), "the run artifact")
    return str(path)


def read_json(path: str | Path, roots: Roots) -> Any:
    """A run artifact an ask names: read only from under the runs root."""
    try:
        return json.loads(roots.read_text("runs", path, "the run artifact"))
    except (OSError, ValueError) as exc:
        raise StepFailed(
            f"cannot read the run artifact {path}: {exc}; run the backpass again"
        ) from None


def confined_repos(
    data: dict[str, Any], params: RunParams, ctx: StepContext
) -> dict[str, RepoInfo]:
    """The ask's repositories, which must be the run's own public and private ones."""
    repos = repos_from(data)
    for name, info in repos.items():
        expected = params.path(ctx.home, name)
        if Path(info.path).resolve() != expected:
            raise StepFailed(
                f"this ask's {name} repository {info.path} is not the run's {name} memory "
                f"({expected}); nothing was read or written. Ask the foreman for a new run"
            )
    return repos


def memory_bullets(repos: dict[str, RepoInfo], memory_file: str) -> dict[str, list[Any]]:
    """Both memories' bullets at the run's base commits; a missing memory.md is an error."""
    out: dict[str, list[Any]] = {}
    for name, info in repos.items():
        text = show_file(Path(info.path), info.commit, memory_file)
        if text is None:
            raise StepFailed(
                f"the {name} repository {info.path} has no {memory_file} on {info.base}; "
                "commit one (it may be empty) and run again"
            )
        out[name] = bullets(text, PREFIX[name])
    return out


def list_traces(message: Message, ctx: StepContext) -> Reply:
    """Step 1: pending traces by hash, numbered bullets, ledger ids, the bases to build on.

    The state file is checked again here, before any analysis is paid for: the command
    checked it, but it may have been edited since, or the ask posted by hand."""
    data = _data(message)
    params, roots = _params(data, ctx)
    try:
        state_file = params.path(ctx.home, "state")
        state = check_state(state_file, write=not params.report_only, roots=roots)
    except StateFileError as exc:
        raise StepFailed(str(exc)) from None
    folder = _folder(message, ctx, params, roots)
    template_notes = []
    for step in ("analysis", "synthesis"):  # fail before any model call, not after
        path = params.path(ctx.home, f"{step}_prompt")
        unknown = unknown_placeholders(load_template(path, step, roots), step)
        if unknown:
            markers = ", ".join("{{" + name + "}}" for name in unknown)
            verb = "is not a placeholder" if len(unknown) == 1 else "are not placeholders"
            template_notes.append(
                f"{path.name}: {markers} {verb} and reach{'es' if len(unknown) == 1 else ''} "
                "the model as written"
            )
    try:
        listing = scan(params.path(ctx.home, "traces"))
    except FileNotFoundError as exc:
        raise StepFailed(str(exc)) from None
    found, skipped, refused = listing.traces, listing.skipped, listing.refused
    todo = pending(found, state)
    listed: list[dict[str, Any]] = []
    used = 0
    for n, trace in enumerate(todo, start=1):
        entry = {"n": n, **trace.to_dict()}
        used += len(json.dumps(entry)) + 2
        if len(listed) >= params.max_traces or used > LIST_BUDGET_BYTES:
            break
        listed.append(entry)
    repos = {
        name: inspect_repo(params.path(ctx.home, name), params.branch_prefix)
        for name in ("public", "private")
    }
    memory = memory_bullets(repos, params.memory_file)
    private = repos["private"]
    ledger_text = show_file(Path(private.path), private.commit, params.ledger) or ""
    open_lines = ledgers.open_entries(ledgers.parse(ledger_text))
    relays = relay.open_relays(  # step 1's relay: merged backpasses with unchecked lines
        params.path(ctx.home, "runs"), roots, Path(private.path), private.default
    )
    write_json(
        folder / "listing.json",
        {
            "pending": [{"n": n, **t.to_dict()} for n, t in enumerate(todo, start=1)],
            "skipped_binary": skipped,
            "refused": refused,
            "bullets": {k: [[b.id, b.text] for b in v] for k, v in memory.items()},
            "ledger": [[e.id, e.render()] for e in open_lines],
        },
        roots,
    )
    deferred = len(todo) - len(listed)
    waiting = {t.path for t in todo}
    unchanged = [t.session for t in found if t.path not in waiting]
    body = (
        f"step 1: {len(todo)} of {len(found)} traces pending"
        + (f", {deferred} deferred to the next run" if deferred else "")
        + f"; {len(memory['public'])} public and {len(memory['private'])} private bullets; "
        f"{len(open_lines)} open ledger lines"
        + "".join(f"; REFUSED {link}: a link out of the traces folder" for link in refused)
        + (
            f"; {counted(len(relays), 'merged backpass')} with unchecked relay lines"
            if relays
            else ""
        )
    )
    return Reply(
        body,
        {
            "traces": listed,
            "found": len(found),
            "pending": len(todo),
            "deferred": deferred,
            "unchanged": unchanged[:UNCHANGED_NAMED],
            "unchanged_count": len(unchanged),
            "skipped_binary": len(skipped),
            "refused": refused,
            "repos": {name: info.to_dict() for name, info in repos.items()},
            "bullets": {name: len(v) for name, v in memory.items()},
            "ledger_open": len(open_lines),
            "run_dir": str(folder),
            "template_notes": template_notes,
            "relays": [r.to_dict() for r in relays],
        },
    )


BUDGET_MARGIN_S = 5.0  # kept back from the analyst's own timeout to write the reply


def _budget(ctx: StepContext) -> float | None:
    """The analyst nick's own timeout (its lurker stops the step after it), if configured."""
    nick = ctx.home.society.nicks.get(ctx.nick)
    timeout = getattr(nick, "timeout_s", None)
    return float(timeout) if isinstance(timeout, int | float) else None


async def _analyse_chunk(
    ctx: StepContext,
    params: RunParams,
    request: JudgmentRequest,
    session: str,
    part: str,
    left: float | None,
) -> Judgment[Any]:
    """One bulk call under the hard timeout, or what is `left` of the nick's own time if
    that is less; StepFailed names the trace (and the chunk) and which limit ran out."""
    limit = params.timeout_s if left is None else min(params.timeout_s, left)
    try:
        return await asyncio.wait_for(
            seating.judge(ctx, params, "bulk", request, AnalysisAnswer), timeout=limit
        )
    except TimeoutError:
        if limit < params.timeout_s:
            raise _out_of_budget(ctx, session, part) from None
        raise StepFailed(
            f"the analysis of {session}{part} ran over the hard timeout of "
            f"{params.timeout_s:.0f} s (retry and fallback included); it stays pending. Raise "
            "[backpass] timeout_s or check the bulk seat"
        ) from None
    except SeatError as exc:
        raise StepFailed(
            f"no seat gave a valid analysis of {session}{part}: {exc.message}"
        ) from None


def _out_of_budget(ctx: StepContext, session: str, part: str) -> StepFailed:
    return StepFailed(
        f"the analysis of {session} ran out of the {ctx.nick} nick's own timeout_s "
        f"({_budget(ctx) or 0:.0f} s) at{part or ' its only chunk'}; it stays pending. A long "
        f"trace takes one bulk call per chunk: raise [nicks.{ctx.nick}] timeout_s to at least "
        "[backpass] timeout_s times the chunks of your longest trace, plus timeout_margin_s"
    )


async def analyse(message: Message, ctx: StepContext) -> Reply:
    """Step 2: the bulk seat's analysis of one trace, in overlapping chunks when it is longer
    than one call's context (agents.backpass.chunks), each call under a hard timeout."""
    data = _data(message)
    params, roots = _params(data, ctx)
    folder = _folder(message, ctx, params, roots)
    trace = data.get("trace") or {}
    try:
        n, path, session = int(trace["n"]), Path(trace["path"]), str(trace["session"])
    except (KeyError, TypeError, ValueError):
        raise StepFailed("this ask's data.trace must hold n, path and session") from None
    try:
        raw = await read_trace(path, params.max_trace_chars, _traces(ctx, params))
    except TraceTooLarge as exc:
        raise StepFailed(
            f"trace {session} ({path}) is {exc}; raise [backpass] max_trace_chars (a trace "
            "under it is analysed in chunks, however long)"
        ) from None
    except OSError as exc:
        raise StepFailed(f"cannot read trace {session} ({path}): {exc.strerror or exc}") from None
    text = render(path, raw)
    # Before a model sees it: a trace holding the home's secret or a private key fails here,
    # named, and stays pending (the judge screens every prompt again, without the file's name).
    ctx.home.screen.check(raw, f"trace {session} ({path})")
    ctx.home.screen.check(text, f"trace {session} ({path}), as rendered for the model")
    if len(text) > params.max_trace_chars:
        raise StepFailed(
            f"trace {session} is {len(text)} characters, over max_trace_chars "
            f"({params.max_trace_chars}); raise [backpass] max_trace_chars (a trace under it "
            "is analysed in chunks, however long)"
        )
    template = load_template(params.path(ctx.home, "analysis_prompt"), "analysis", roots)
    size = chunks.window(
        params.context_chars, params.context_tokens, params.chunk_overlap_chars, len(template)
    )
    parts = chunks.split(text, size, params.chunk_overlap_chars)
    judgments: list[Judgment[Any]] = []
    answers: list[list[dict[str, str]]] = []
    budget, started = _budget(ctx), time.monotonic()
    for k, part in enumerate(parts, start=1):
        shown = session
        where = ""
        if len(parts) > 1:
            where = f" (chunk {k} of {len(parts)})"
            shown = (
                f"{session} (part {k} of {len(parts)}: characters {part.start + 1} to "
                f"{part.end} of {len(text)}; the parts overlap)"
            )
        request = analysis_request(
            template, session=shown, trace=part.text, date=str(data.get("date", "")), path=str(path)
        )
        spent = time.monotonic() - started
        left = None if budget is None else budget - BUDGET_MARGIN_S - spent
        if left is not None and left <= 0:
            raise _out_of_budget(ctx, session, where)
        judgment = await _analyse_chunk(ctx, params, request, session, where, left)
        judgments.append(judgment)
        answers.append(judgment.answer.items())
    items = chunks.merge_items(answers)
    counts = {
        kind: sum(1 for i in items if i["kind"] == kind) for kind in ("positive", "negative", "gap")
    }
    last = judgments[-1]
    record = {
        "n": n,
        "session": session,
        "path": str(path),
        "sha256": sha256(raw),
        "size": len(raw),
        "chars": len(text),
        "chunks": len(parts),
        "items": items,
        "provenance": last.provenance(),
        "provenances": [j.provenance() for j in judgments],
    }
    artifact = folder / "analysis" / f"{n:05d}.json"  # and in the store: step 3 may be elsewhere
    handed = await hand_on(ctx, "analysis", artifact, artifact_bytes(record), roots, "artifact")
    seats = sorted({j.seat for j in judgments})
    fallback_used = any(j.fallback_used for j in judgments)
    body = (
        f"step 2: {session}: {counted(len(items), 'item')} ({counts['positive']} positive, "
        f"{counts['negative']} negative, {counted(counts['gap'], 'gap')}) from seat "
        f"{', '.join(seats)}"
        + (" (fallback)" if fallback_used else "")
        + (f", in {len(parts)} chunks of at most {size} characters" if len(parts) > 1 else "")
    )
    keep = ("n", "session", "path", "sha256", "size", "chunks", "provenance", "provenances")
    return Reply(
        body,
        {
            **{key: record[key] for key in keep},
            "seat": last.seat,
            "fallback_used": fallback_used,
            "items": len(items),
            "counts": counts,
            **handed,
        },
    )


async def check_quotes(message: Message, ctx: StepContext) -> Reply:
    """Step 3: keep an item only if its whitespace-folded quote is in its trace."""
    data = _data(message)
    params, roots = _params(data, ctx)
    folder = _folder(message, ctx, params, roots)
    traces = _traces(ctx, params)
    kept: list[dict[str, Any]] = []
    returned = dropped = 0
    changed: list[dict[str, Any]] = []
    checked: list[int] = []
    per_trace: list[dict[str, Any]] = []
    drops: dict[str, int] = {}
    for analysis in data.get("analyses") or []:
        named = analysis["artifact"]
        local = folder / "analysis" / Path(str(named)).name
        here_now = await arrive(
            ctx, "quotes", named, analysis.get("artifact_sha256"), local, roots,
            analysis.get("artifact_problem"),
        )  # fmt: skip
        record = read_json(here_now, roots)
        try:
            path, size, digest = Path(record["path"]), int(record["size"]), str(record["sha256"])
            raw = read_snapshot(path, size, digest, traces)
        except (TraceChanged, OutsideRoot, OSError) as exc:
            changed.append({"n": record["n"], "session": record["session"], "reason": str(exc)})
            continue
        result = check_items(record["items"], render(record["path"], raw))
        checked.append(int(record["n"]))
        per_trace.append(
            {
                "n": record["n"],
                "session": record["session"],
                "kept": len(result.kept),
                "dropped": len(result.dropped),
                "chunks": int(record.get("chunks") or 1),
            }
        )
        returned += result.returned
        dropped += len(result.dropped)
        if result.dropped:
            drops[record["session"]] = len(result.dropped)
        kept += [{**item, "session": record["session"], "n": record["n"]} for item in result.kept]
    handed = await hand_on(
        ctx, "quotes", folder / "items.json", artifact_bytes(kept), roots, "items_file"
    )
    worst = dict(sorted(drops.items(), key=lambda kv: (-kv[1], kv[0]))[:20])
    body = f"step 3: {returned} items, {dropped} dropped for a quote not in the trace, {len(kept)} kept"
    return Reply(
        body,
        {
            "returned": returned,
            "dropped": dropped,
            "kept": len(kept),
            "checked": checked,
            "per_trace": per_trace,
            "changed": changed,
            "dropped_by_trace": worst,
            **handed,
        },
    )


async def keep_ledger(message: Message, ctx: StepContext) -> Reply:
    """Step 4: ledger lines, corroborations and prunes, written to the run folder."""
    data = _data(message)
    params, roots = _params(data, ctx)
    folder = _folder(message, ctx, params, roots)
    repos = confined_repos(data, params, ctx)
    memory = memory_bullets(repos, params.memory_file)
    private = repos["private"]
    original = show_file(Path(private.path), private.commit, params.ledger) or ""
    items: list[Any] = []
    if data.get("items_file"):
        named = await arrive(
            ctx, "ledger", data["items_file"], data.get("items_file_sha256"),
            folder / "items.json", roots, data.get("items_file_problem"),
        )  # fmt: skip
        items = read_json(named, roots)
    update = ledgers.update(
        original,
        items,
        [*memory["public"], *memory["private"]],
        day=str(data["date"]),
        max_age_days=params.max_age_days,
        match_threshold=params.match_threshold,
        cover_threshold=params.cover_threshold,
    )
    ledger = folder / "ledger.md"
    handed = await hand_on(ctx, "ledger", ledger, update.text.encode("utf-8"), roots, "ledger_file")
    prunes = {"age": update.pruned_age, "covered": update.pruned_covered}
    write_json(folder / "prunes.json", prunes, roots)
    counts = update.counts()
    body = (
        f"step 4: {counts['new_lines']} new ledger lines, {counts['corroborations']} "
        f"corroborations, {counts['repeats']} repeats, {counts['covered']} already in memory, "
        f"{counts['prunes_age'] + counts['prunes_covered']} prunes"
    )
    return Reply(body, {**counts, **handed})


async def synthesize(message: Message, ctx: StepContext) -> Reply:
    """Step 5: one synthesis call, then branches, commits, PR body and the state file."""
    data = _data(message)
    params, roots = _params(data, ctx)
    folder = _folder(message, ctx, params, roots)
    if data.get("ledger_file"):
        data["ledger_file"] = str(
            await arrive(
                ctx, "synthesis", data["ledger_file"], data.get("ledger_file_sha256"),
                folder / "ledger.md", roots, data.get("ledger_file_problem"),
            )
        )  # fmt: skip
    data["repos"] = {k: v.to_dict() for k, v in confined_repos(data, params, ctx).items()}
    return await publish.synthesize_and_publish(data, params, folder, ctx, roots)

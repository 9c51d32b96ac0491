"""The expedition's step agents: one handler per nick, message in, reply out.

    build_context        @context    step 0
    gen_terms            @termgen    step 1 (model: termgen)
    retrieve_candidates  @retriever  step 2
    score_batch          @scorer     step 3 (model: score), one batch per ask
    pick_scotoma         @scotoma    step 4 (model: scotoma)
    extract_excerpts     @excerpter  step 5       (in agents.expedition.late_steps)
    assemble_brief       @briefer    step 6       (in agents.expedition.late_steps)

Each reads its inputs from the ask's data and returns its outputs in the
reply's data; the logic lives in the sibling modules and the handlers do
only the file reads and the model calls. A model step names the seat that
answered in its data. A step that cannot do its work raises StepFailed,
which the lurker posts as a FAILED flag and the foreman reports.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from agents.expedition.blaze import Blaze, BlazeError, read_blaze
from agents.expedition.config import ExpeditionConfig
from agents.expedition.context import make_context
from agents.expedition.kb import check_file, check_kb, load_index, locate, on_disk
from agents.expedition.prompts import (
    TERMS_INPUT_KEYS,
    score_request,
    scotoma_request,
    termgen_request,
)
from agents.expedition.retrieve import retrieve
from agents.expedition.scoring import scores_schema
from agents.expedition.scotoma import DEEP_MIN, scotoma_schema, split_named
from agents.expedition.terms import (
    TermsAnswer,
    anchor_words,
    check_terms,
    settle,
    shares_word,
    terms_schema,
)
from agents.expedition.travel import hand_on_files
from agents.expedition.vocabulary import corpus_words
from agents.roots import Roots
from agents.runtime.step import Judgment, JudgmentRequest, Reply, StepContext
from agents.wording import counted
from room.errors import ConfigError, SeatError, StepFailed
from room.message import Message

AnswerT = TypeVar("AnswerT", bound=BaseModel)
FLAGS_NAMED = 10  # flags spelled out in a failure; the rest are counted


def data_of(message: Message) -> dict[str, Any]:
    return dict(message.data or {})


def config_of(ctx: StepContext) -> ExpeditionConfig:
    return ExpeditionConfig.from_home(ctx.home)


def context_of(message: Message) -> dict[str, Any]:
    context = data_of(message).get("context")
    if not isinstance(context, dict):
        raise StepFailed("the ask carries no context; expedition steps are asked by the foreman")
    return context


def _rows(message: Message) -> list[dict[str, Any]]:
    rows = data_of(message).get("rows")
    if not isinstance(rows, list) or not rows:
        raise StepFailed("the ask carries no rows to judge; it must come from the foreman's run")
    return rows


def _provenance(judgment: Judgment[Any]) -> dict[str, Any]:
    return {
        "seat": judgment.seat,
        "fallback_used": judgment.fallback_used,
        "judgment": judgment.provenance(),
    }


def named(flags: list[str], limit: int = FLAGS_NAMED) -> str:
    """The first `limit` flags, then how many more: a failure names files without flooding."""
    text = " ".join(flags[:limit])
    if len(flags) > limit:
        text += f" and {len(flags) - limit} more"
    return text


async def _judge(
    ctx: StepContext, role: str, request: JudgmentRequest, schema: type[AnswerT]
) -> Judgment[AnswerT]:
    try:
        return await ctx.judge(role, request, schema)
    except SeatError as exc:
        raise StepFailed(f"no valid {role} answer: {exc.message}") from exc


def blaze_step(path: Path, roots: Roots) -> Blaze:
    """The run's blaze, read from under its root; its problem, as the command would refuse it."""
    try:
        return read_blaze(roots.check("blaze", path, "the blaze file"), roots)
    except BlazeError as exc:
        raise StepFailed(exc.message) from None


def read_blaze_step(path: Path, roots: Roots) -> tuple[list[str], list[str]]:
    """(claims, named phrases) of the run's blaze."""
    blaze = blaze_step(path, roots)
    return blaze.claims, blaze.phrases


def roots_of(ctx: StepContext) -> Roots:
    """The home's kb, blaze and briefs roots (society.toml), as a StepFailed if misconfigured."""
    try:
        return config_of(ctx).roots(ctx.home)
    except ConfigError as exc:
        raise StepFailed(exc.message) from None


def kb_of(ctx: StepContext, context: dict[str, Any]) -> Path:
    """The run's knowledge base from the ask's context, refused unless under the kb root.

    Every step checks it again: the ask is data from a poster, not step 0's word."""
    return roots_of(ctx).check("kb", str(context["kb"]), "the knowledge base")


def _text_or_none(value: Any) -> str | None:
    return str(value) if value else None


def build_context(message: Message, ctx: StepContext) -> Reply:
    """Step 0: check the run's parameters, the knowledge base and its index, and the blaze.

    The index is parsed here, not first in step 1, so a broken one fails
    this step by name instead of surfacing as a termgen seat's failure.
    """
    request = data_of(message)
    config = config_of(ctx)
    try:
        paths = config.paths(
            ctx.home,
            kb=_text_or_none(request.get("kb")),
            blaze=_text_or_none(request.get("blaze")),
            briefs=_text_or_none(request.get("briefs")),
        )
    except ConfigError as exc:
        raise StepFailed(exc.message) from None
    kb, briefs_dir = paths.kb, paths.briefs
    check_kb(kb)
    claims: list[str] = []
    phrases: list[str] = []
    blaze_path = None
    if paths.blaze is not None:
        claims, phrases = read_blaze_step(paths.blaze, paths.roots)
        blaze_path = str(paths.blaze)
    try:
        context = make_context(
            request,
            kb=str(kb),
            briefs=str(briefs_dir),
            blaze_path=blaze_path,
            blaze_claims=claims,
            blaze_phrases=phrases,
        )
    except ValueError as exc:
        raise StepFailed(str(exc)) from None
    body = f"context for {context['title']!r}: keyword {context['keyword_primary']!r}"
    if blaze_path:
        body += f", {len(claims)} blaze claims, {len(phrases)} named phrases"
    return Reply(body, {"context": context, "limits": config.limits(), "flags": []})


async def gen_terms(message: Message, ctx: StepContext) -> Reply:
    """Step 1: terms from the model, through the fan-out gate, with one retry.

    The index is read first: the local seat derives its terms from it, and a
    seat wraps what goes wrong inside it as its own failure, retried and
    reported as the seat's; a knowledge-base problem must be reported as one.
    """
    context = context_of(message)
    guidance = config_of(ctx).guidance.get("termgen", "")
    anchors = anchor_words(
        context["keyword_primary"], context["title"], context.get("blaze_phrases") or []
    )
    vocabulary: list[str] = []
    if context.get("kb"):  # step 0 puts it there; a hand-made context may not
        vocabulary = corpus_words(load_index(kb_of(ctx, context)).rows, anchors)
    first = await _judge(
        ctx,
        "termgen",
        termgen_request(context, guidance=guidance, vocabulary=vocabulary),
        TermsAnswer,
    )
    judgments = [first]
    checked = check_terms(first.answer.terms, anchors, TERMS_INPUT_KEYS)
    retried = None
    if not checked.ok:
        # The retry chooses among the corpus's own words: none shares a word with the
        # anchors and each is found in a summary, so a model that wrote one term twelve times,
        # or the title in costume, is held to terms that fan out and find files.
        request = termgen_request(
            context,
            avoid=checked.failing,
            problems=checked.problems(),
            guidance=guidance,
            vocabulary=vocabulary,
            choose=bool(vocabulary),
        )
        second = await _judge(ctx, "termgen", request, terms_schema(vocabulary))
        judgments.append(second)
        retried = check_terms(second.answer.terms, anchors, TERMS_INPUT_KEYS)
    terms, flags = settle(checked, retried)
    if not terms:
        raise StepFailed(
            "the termgen seat gave no usable terms, twice; check the seat's model or "
            "rephrase the title and keyword"
        )
    fanout = [t for t in terms if not shares_word(t, anchors)]
    body = f"{len(terms)} terms, {len(fanout)} fan out: " + "; ".join(terms)
    if flags:
        body += " " + " ".join(flags)
    return Reply(
        body,
        {
            "terms": terms,
            "fanout": fanout,
            "flags": flags,
            "seat": judgments[-1].seat,
            "fallback_used": judgments[-1].fallback_used,
            "judgments": [j.provenance() for j in judgments],
            # The gate's misses, counted in the run's report: the first answer's, the retry's.
            "gates_missed": checked.missed() + (retried.missed() if retried else []),
            "gate_rescued": bool(retried and retried.ok),
        },
    )


async def retrieve_candidates(message: Message, ctx: StepContext) -> Reply:
    """Step 2: substring retrieval over the index, prescored and capped.

    Every row is checked for its file (a stat); only the rows that matched
    are opened, and only as far as their frontmatter's closing fence, so a
    file step 5 could not read is flagged here by name and left out. Each
    candidate's file then goes into the room's object store, named by its
    SHA-256 in the candidate, for a step 5 on a host without the knowledge
    base (agents.expedition.travel).
    """
    context = context_of(message)
    terms = [str(t) for t in data_of(message).get("terms") or []]
    config = config_of(ctx)
    kb = kb_of(ctx, context)
    index = load_index(kb)
    flags = list(index.flags)
    present = []
    missing = []
    for row in index.rows:
        path, flag = locate(kb, row.file)
        if path is None:
            missing.append(str(flag))
        else:  # from here on the file is named as it is on disk, `Corpus/` resolved
            present.append(replace(row, file=on_disk(kb, row.file) or row.file))
    flags += missing
    if not present:
        raise StepFailed(
            f"none of the {len(index.rows)} files the index lists exists under {kb} "
            f"({named(missing)}); check the index's file column against the folder"
        )
    matched = retrieve(
        present,
        terms,
        archetype=context.get("archetype_primary"),
        monomyth=context.get("monomyth_hint"),
    )
    if not matched:
        raise StepFailed(
            f"no index row matched any of the {len(terms)} terms or the structural filter; "
            "redirect with other words, or check the index's summary and keypoints columns"
        )
    found = []
    unusable = []
    for candidate in matched:
        flag = check_file(kb, str(candidate["file"]))
        if flag is None:
            found.append(candidate)
        else:
            unusable.append(flag)
    flags += unusable
    if not found:
        raise StepFailed(
            f"no matching row names a file that can be read ({named(unusable)}); fix those "
            "files, or redirect with other words"
        )
    candidates, problem = await hand_on_files(ctx, kb, found[: config.max_candidates])
    body = (
        f"{counted(len(candidates), 'candidate')} of {counted(len(found), 'matching row')} "
        f"({len(index.rows)} indexed)"
    )
    if unusable:
        body += f", {len(unusable)} left out: " + named(unusable)
    return Reply(
        body,
        {
            "candidates": candidates,
            "matched": len(found),
            "left_out": len(unusable),
            "indexed": len(index.rows),
            "flags": flags,
            **({"content_problem": problem} if problem else {}),
        },
    )


async def score_batch(message: Message, ctx: StepContext) -> Reply:
    """Step 3: one batch of summaries scored; every id exactly once."""
    data = data_of(message)
    rows = _rows(message)
    request = score_request(
        str(data.get("pattern") or ""),
        [str(t) for t in data.get("terms") or []],
        rows,
        keyword=str(data.get("keyword") or ""),
        focus=str(data.get("focus") or ""),
        redirects=[str(r) for r in data.get("redirects") or []],
        guidance=config_of(ctx).guidance.get("score", ""),
    )
    judgment = await _judge(ctx, "score", request, scores_schema([str(r["id"]) for r in rows]))
    scores = [score.model_dump() for score in judgment.answer.scores]
    batch, of = data.get("batch", 1), data.get("of", 1)
    return Reply(
        f"batch {batch} of {of}: {len(scores)} summaries scored",
        {"scores": scores, "batch": batch, "of": of, **_provenance(judgment)},
    )


async def pick_scotoma(message: Message, ctx: StepContext) -> Reply:
    """Step 4: 0-2 deep cuts and the direct hits among the top rows.

    The direct hits (well-scored rows that name the keyword) are computed; the model is
    asked only which of the well-scored rows that do not name it are deep cuts, and not
    asked at all when there is none (pass 4 empty, no call).
    """
    data = data_of(message)
    rows = _rows(message)
    keyword = str(data.get("keyword") or "")
    direct, open_rows = split_named(rows, keyword)
    deep: list[dict[str, Any]] = []
    provenance: dict[str, Any] = {"seat": None, "fallback_used": False}
    if open_rows:
        request = scotoma_request(
            str(data.get("pattern") or ""),
            keyword,
            [str(t) for t in data.get("terms") or []],
            open_rows,
            guidance=config_of(ctx).guidance.get("scotoma", ""),
        )
        ids = [str(r["id"]) for r in open_rows]
        judgment = await _judge(ctx, "scotoma", request, scotoma_schema(ids))
        deep = [cut.model_dump() for cut in judgment.answer.deep_cuts]
        provenance = _provenance(judgment)
    body = (
        f"{counted(len(deep), 'deep cut')}, {counted(len(direct), 'direct hit')}"
        + (" (pass 4 empty)" if not deep else "")
        + (
            ""
            if open_rows
            else f"; every top row names the keyword or scored below {DEEP_MIN}, "
            "so no model was asked"
        )
    )
    return Reply(
        body,
        {"deep_cuts": deep, "direct_hits": direct, "pass4_empty": not deep, **provenance},
    )

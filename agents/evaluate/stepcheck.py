"""Each step case's request, built by its pipeline, and the validators of its answer.

`prepare` turns a case's input into the JudgmentRequest its pipeline sends (the same
prompt builder, the same schema, the same max_tokens) and a `check` that judges the
answer: the step's own gate first (the pipelines' functions, never re-implemented),
then what the case expects. `check` returns {validator: why} for each that failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from agents.evaluate import stepcases as sc

if TYPE_CHECKING:
    from agents.evaluate.cases import Loaded
    from agents.evaluate.society import EvalSociety
    from agents.seats.request import JudgmentRequest

Check = Callable[[dict[str, Any]], dict[str, str]]


@dataclass(frozen=True)
class Asked:
    role: str
    request: JudgmentRequest
    schema: type[BaseModel]
    check: Check
    # The answer the step's own code gives without a model, as the pipeline does (the
    # scotoma step with no row a deep cut may come from): checked, and no call made.
    answered: dict[str, Any] | None = None


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())


def _terms(society: EvalSociety, loaded: Loaded, given: Any, expect: Any) -> Asked:
    from agents.expedition.config import ExpeditionConfig
    from agents.expedition.context import make_context
    from agents.expedition.kb import load_index, on_disk
    from agents.expedition.prompts import TERMS_INPUT_KEYS, termgen_request
    from agents.expedition.retrieve import retrieve
    from agents.expedition.terms import TermsAnswer, anchor_words, check_terms
    from agents.expedition.vocabulary import corpus_words

    kb = loaded.copy_folder("kb", society.root / "kb" / loaded.name)
    config = ExpeditionConfig.from_home(society.home)
    context = make_context(
        {"title": given.title, "keyword": given.keyword},
        kb=str(kb),
        briefs=str(society.root / "briefs"),
        blaze_path=None,
        blaze_claims=[],
        blaze_phrases=list(given.blaze_phrases),
    )
    context["redirect"] = given.redirect
    anchors = anchor_words(given.keyword, given.title, given.blaze_phrases)
    rows = load_index(kb).rows
    request = termgen_request(
        context,
        guidance=config.guidance.get("termgen", ""),
        vocabulary=corpus_words(rows, anchors),
    )

    def check(answer: dict[str, Any]) -> dict[str, str]:
        failed: dict[str, str] = {}
        checked = check_terms(
            [str(t) for t in answer.get("terms") or []], anchors, TERMS_INPUT_KEYS
        )
        if not checked.ok:
            failed["fanout"] = checked.problems()
        found = retrieve(
            rows, checked.terms, archetype=None, monomyth=None, cap=config.max_candidates
        )
        files = {on_disk(kb, str(row.get("file"))) or str(row.get("file")) for row in found}
        if len(found) < expect.min_candidates:
            failed["candidates"] = (
                f"the terms found {len(found)} rows, fewer than {expect.min_candidates}"
            )
        missed = [f for f in expect.find if f not in files]
        if missed:
            failed["find"] = "the terms found none of the rows of " + ", ".join(missed)
        return failed

    return Asked("termgen", request, TermsAnswer, check)


def _rows(given: Any) -> list[dict[str, Any]]:
    return [row.model_dump(exclude_none=True) for row in given.rows]


def _score(society: EvalSociety, loaded: Loaded, given: Any, expect: Any) -> Asked:
    from agents.expedition.config import ExpeditionConfig
    from agents.expedition.prompts import score_request
    from agents.expedition.scoring import scores_schema

    rows = _rows(given)
    guidance = ExpeditionConfig.from_home(society.home).guidance.get("score", "")
    request = score_request(
        given.pattern, list(given.terms), rows, keyword=given.keyword, focus=given.pattern,
        guidance=guidance,
    )  # fmt: skip

    def check(answer: dict[str, Any]) -> dict[str, str]:
        scored = {str(s.get("id")): int(s.get("embodies", 0)) for s in answer.get("scores") or []}
        failed: dict[str, str] = {}
        low = [i for i in expect.high if scored.get(i, 0) < 2]
        if low:
            failed["high"] = "scored below 2: " + ", ".join(f"{i} ({scored.get(i)})" for i in low)
        high = [i for i in expect.low if scored.get(i, 0) > 1]
        if high:
            failed["low"] = "scored above 1: " + ", ".join(f"{i} ({scored[i]})" for i in high)
        return failed

    return Asked("score", request, scores_schema([row["id"] for row in rows]), check)


def _scotoma(society: EvalSociety, loaded: Loaded, given: Any, expect: Any) -> Asked:
    from agents.expedition.config import ExpeditionConfig
    from agents.expedition.prompts import scotoma_request
    from agents.expedition.scotoma import scotoma_schema, split_named

    _, rows = split_named(_rows(given), given.keyword)  # the rows the step would offer
    guidance = ExpeditionConfig.from_home(society.home).guidance.get("scotoma", "")
    request = scotoma_request(
        given.pattern, given.keyword, list(given.terms), rows, guidance=guidance
    )

    def check(answer: dict[str, Any]) -> dict[str, str]:
        chosen = {str(cut.get("id")) for cut in answer.get("deep_cuts") or []}
        failed: dict[str, str] = {}
        missed = [i for i in expect.include if i not in chosen]
        if missed:
            failed["include"] = "not chosen: " + ", ".join(missed)
        wrong = sorted(chosen & set(expect.exclude))
        if wrong:
            failed["exclude"] = "chosen, but no deep cut: " + ", ".join(wrong)
        if expect.none and chosen:
            failed["none"] = "no row qualifies, but it chose " + ", ".join(sorted(chosen))
        return failed

    schema = scotoma_schema([row["id"] for row in rows])
    return Asked("scotoma", request, schema, check, None if rows else {"deep_cuts": []})


def _template(society: EvalSociety, step: str) -> str:
    from agents.backpass.config import BackpassConfig
    from agents.backpass.prompts import load_template

    config = BackpassConfig.from_home(society.home)
    name = config.analysis_prompt if step == "analysis" else config.synthesis_prompt
    return load_template(society.home.path(name), step)


def _analysis(society: EvalSociety, loaded: Loaded, given: Any, expect: Any) -> Asked:
    from agents.backpass.prompts import analysis_request
    from agents.backpass.quotes import check_items
    from agents.backpass.schemas import KIND_OF_ARRAY, AnalysisAnswer

    request = analysis_request(
        _template(society, "analysis"), session=given.session, trace=given.trace,
        date=given.date, path=given.session,
    )  # fmt: skip

    def check(answer: dict[str, Any]) -> dict[str, str]:
        items = [
            {**item, "kind": kind}
            for array, kind in KIND_OF_ARRAY.items()
            for item in answer.get(array) or []
        ]
        failed: dict[str, str] = {}
        quoted = check_items(items, given.trace)
        if quoted.dropped:
            failed["quoted"] = f"{len(quoted.dropped)} quote(s) not in the trace: " + "; ".join(
                repr(str(i.get("quote"))[:60]) for i in quoted.dropped[:3]
            )
        if len(items) < expect.min_items:
            failed["min_items"] = f"{len(items)} items, fewer than {expect.min_items}"
        for kind, array in (("positive", "positive"), ("negative", "negative"), ("gap", "gaps")):
            wanted = getattr(expect, array)
            have = sum(1 for item in items if item["kind"] == kind)
            if have < wanted:
                failed[array] = f"{have} {array} items, fewer than {wanted}"
        said = _folded(" ".join(f"{i.get('text')} {i.get('quote')}" for i in items))
        absent = [m for m in expect.mentions if _folded(m) not in said]
        if absent:
            failed["mentions"] = "no item mentions " + "; ".join(absent)
        return failed

    return Asked("bulk", request, AnalysisAnswer, check)


def _synthesis(society: EvalSociety, loaded: Loaded, given: Any, expect: Any) -> Asked:
    from agents.backpass.ledger import Entry
    from agents.backpass.memory import Bullet
    from agents.backpass.prompts import synthesis_request
    from agents.backpass.schemas import bind_synthesis

    entries = [
        Entry(open=True, kind=line.kind, text=line.text,
              sightings=[(given.date, session) for session in line.sessions])
        for line in given.ledger
    ]  # fmt: skip
    public = [Bullet(b.id, b.text, n, n + 1) for n, b in enumerate(given.public)]
    private = [Bullet(b.id, b.text, n, n + 1) for n, b in enumerate(given.private)]
    request = synthesis_request(
        _template(society, "synthesis"), date=given.date, entries=entries, public=public,
        private=private, min_sessions=given.min_sessions, cover_threshold=0.8,
    )  # fmt: skip
    ids = {entry.text: entry.id for entry in entries}
    schema = bind_synthesis([b.id for b in public + private], list(ids.values()))

    def check(answer: dict[str, Any]) -> dict[str, str]:
        edits = [e for e in answer.get("edits") or [] if isinstance(e, dict)]
        cited = {str(s) for e in edits for s in e.get("sources") or []}
        failed: dict[str, str] = {}
        uncited = [text for text in expect.cites if ids[text] not in cited]
        if uncited:
            failed["cites"] = "no edit cites the ledger line " + "; ".join(map(repr, uncited))
        touched = sorted({str(e.get("bullet")) for e in edits if e.get("op") != "add"})
        hit = [b for b in expect.untouched if b in touched]
        if hit:
            failed["untouched"] = "edited " + ", ".join(hit)
        if expect.max_edits is not None and len(edits) > expect.max_edits:
            failed["max_edits"] = f"{len(edits)} edits, more than {expect.max_edits}"
        return failed

    return Asked("synthesis", request, schema, check)


def _build(
    society: EvalSociety, loaded: Loaded, given: Any, expect: Any, scratch: Path, seat: str | None
) -> Asked:
    from agents.build.config import BuildConfig
    from agents.build.edits import CodeAnswer, EditRefused, apply_answer
    from agents.build.prompts import CodeContext, code_prompt, testdesign_prompt
    from agents.build.repomap import view_repo
    from agents.runtime.step import JudgmentRequest
    from room.errors import BullpenError

    config = BuildConfig.of(society.home)
    repo = loaded.copy_folder("repo", scratch / "repo")
    spec = given.spec_relative
    spec_path = (repo / spec).resolve()
    spec_text = spec_path.read_text(encoding="utf-8") if spec_path.is_file() else ""
    targets = list(getattr(given, "targets", []))
    view = view_repo(repo, spec, spec_text, targets, config.prompt_tokens)
    job = given.model_dump()
    if isinstance(given, sc.TestdesignInput):
        prompt = testdesign_prompt(job, view)
        step = "testdesign"
    else:
        context = CodeContext(tier="eval", iteration=1, kind="openai", spec_relative=spec,
                              spec_text=spec_text, last_output=given.last_output, view=view)  # fmt: skip
        prompt = code_prompt(job, context)
        step = "code"
    from agents.build.codeseat import CODE_TOKENS
    from agents.build.editschema import code_answer_for

    schema: type[CodeAnswer] = CodeAnswer
    budget = CODE_TOKENS
    if step == "code":  # as the grind's turn asks it (agents/build/codeseat.py): a schema
        table = society.home.society.seats.get(seat or "") or {}  # sized to the budget
        budget = min(CODE_TOKENS, int(table.get("max_tokens") or CODE_TOKENS))
        editable = {path: text for path, text in view.files.items() if path != spec}
        schema = code_answer_for(editable, budget)
    request = JudgmentRequest(step, prompt, max_tokens=budget)
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}

    def check(answer: dict[str, Any]) -> dict[str, str]:
        failed: dict[str, str] = {}
        try:
            written = apply_answer(repo, schema.model_validate(answer), set(view.files), {spec})
        except (EditRefused, BullpenError) as exc:
            return {"applies": str(getattr(exc, "message", exc))[:300]}
        if step == "testdesign" and spec not in written:
            failed["spec_written"] = f"no file at the test path {spec}"
        texts = {}
        for relative in written:
            text = (repo / relative).read_text(encoding="utf-8", errors="replace")
            texts[relative] = text
            if relative.endswith(".py"):
                try:
                    compile(text, relative, "exec")  # compiled, never run
                except (SyntaxError, ValueError) as exc:
                    failed["compiles"] = f"{relative}: {exc}"
        joined = "\n".join(texts.values())
        absent = [c for c in expect.contains if c not in joined]
        if absent:
            failed["contains"] = "the written files lack " + "; ".join(map(repr, absent))
        now = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in repo.rglob("*.py"))
        kept = [g for g in expect.gone if g in now]
        if kept:
            failed["gone"] = "the repo still holds " + "; ".join(map(repr, kept))
        if any(p.read_bytes() != old for p, old in before.items() if p.resolve() == spec_path):
            failed["spec_kept"] = f"the answer changed the spec {spec}"
        if "compiles" not in failed:  # the build's own gate, run behind its fence
            why = _spec_run(society, repo, spec, green=step == "code")
            if why:
                failed["green" if step == "code" else "red"] = why
        return failed

    return Asked(step, request, schema, check)


PYTEST_FAILED = 1  # pytest's exit when tests ran and some failed: a spec collected and red


def _spec_run(society: EvalSociety, repo: Path, spec: str, green: bool) -> str | None:
    """Why the spec did not run as the step needs (green after a code answer; collected and
    red against the stub after a testdesign answer), or None. The repo holds model-written
    code, so the spec runs as the eval's hidden tests do: fenced (runners.hidden_tests)."""
    from agents.evaluate.runners import hidden_tests

    if not (repo / spec).is_file():
        return f"no spec at {spec}"
    from agents.build.config import BuildConfig

    limit = BuildConfig.of(society.home).run_timeout_s  # one test run of a grind
    ran = hidden_tests(repo, repo / spec, society.root, limit_s=limit)
    tail = " | ".join(ran.output.strip().splitlines()[-2:])[-200:]
    if green and ran.returncode != 0:
        return f"the spec fails after the answer: {tail}"
    if not green and ran.returncode != PYTEST_FAILED:
        return f"the spec is not red against the stub (pytest exit {ran.returncode}): {tail}"
    return None


_PREPARE = {"terms": _terms, "score": _score, "scotoma": _scotoma,
            "analysis": _analysis, "synthesis": _synthesis}  # fmt: skip


def prepare(society: EvalSociety, loaded: Loaded, scratch: Path, seat: str | None) -> Asked:
    """The case's request and its check, in `society`'s home (files copied under `scratch`);
    `seat`: the seat a build step is asked of (its request is sized to the seat's cap)."""
    case = loaded.case
    assert isinstance(case, sc.StepCase)
    given, expect = case.parsed()
    if case.pipeline == "build":
        return _build(society, loaded, given, expect, scratch, seat)
    return _PREPARE[case.step](society, loaded, given, expect)


__all__ = ["Asked", "prepare"]

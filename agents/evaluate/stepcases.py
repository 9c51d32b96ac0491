"""The step-level case format: one step's input, and what a good answer to it must satisfy.

A run case (cases.py) judges a whole pipeline; a step case asks one model step once, as
the pipeline asks it (its own prompt builder, its own schema, the seat under test), and
judges the answer with validators: the step's own gate, plus what the case says a good
answer does (the files its terms find, the rows it scores high, the ledger line an edit
cites). Nothing is compared with a hard-coded answer, so any good answer passes, and a
change to one prompt shows as that step's number on the scoreboard (docs/replay.md,
"Step cases").

    kind = "step"
    step = "score"                 # terms, score, scotoma, analysis, synthesis, testdesign, code
    [input]                        # the step's input; its fields depend on the step
    [expect]                       # the validators; their fields depend on the step

Every field is checked by pydantic with bounds (a case is hostile input): a missing,
misspelt or oversized field is an error naming the file and the field, exit 2.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

Text = Annotated[str, Field(min_length=1, max_length=2000)]
Short = Annotated[str, Field(min_length=1, max_length=300)]
RowId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
Path_ = Annotated[str, Field(min_length=1, max_length=400)]
MAX_TRACE_CHARS = 20_000  # a step case's trace is a page, not a night's work

# The pipeline each step belongs to, and the nick that asks it in a run.
PIPELINE = {
    "terms": "expedition",
    "score": "expedition",
    "scotoma": "expedition",
    "analysis": "backpass",
    "synthesis": "backpass",
    "testdesign": "build",
    "code": "build",
}
NICK = {
    "terms": "termgen",
    "score": "scorer",
    "scotoma": "scotoma",
    "analysis": "analyst",
    "synthesis": "synthesizer",
    "testdesign": "testdesigner",
    "code": "py",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- the expedition ---------------------------------------------------------------


class TermsInput(_Strict):
    keyword: Short
    title: Short
    kb: Path_ = Field(description="the case's knowledge-base folder, or @sample")
    blaze_phrases: list[Short] = Field(default_factory=list, max_length=20)
    redirect: Short | None = None


class TermsExpect(_Strict):
    """The fan-out gate always applies; `find`: files the terms must retrieve from the kb."""

    find: list[Path_] = Field(default_factory=list, max_length=20)
    min_candidates: int = Field(default=1, ge=0, le=500)


class Row(_Strict):
    id: RowId
    summary: Text
    file: Path_ | None = None
    keypoints: Text | None = None
    embodies: int | None = Field(default=None, ge=0, le=3)
    why: Text | None = None


class ScoreInput(_Strict):
    pattern: Text
    keyword: Short
    terms: list[Short] = Field(min_length=1, max_length=12)
    rows: list[Row] = Field(min_length=1, max_length=20)


def _known(ids: list[str], rows: list[Row], field: str) -> None:
    have = {row.id for row in rows}
    unknown = [i for i in ids if i not in have]
    if unknown:
        raise ValueError(f"expect.{field} names {unknown}, which are not ids of input.rows")


class ScoreExpect(_Strict):
    """Every id scored once (the step's gate); `high` rows scored 2 or 3, `low` 0 or 1."""

    high: list[RowId] = Field(default_factory=list, max_length=20)
    low: list[RowId] = Field(default_factory=list, max_length=20)


class ScotomaInput(ScoreInput):
    rows: list[Row] = Field(min_length=1, max_length=30)


class ScotomaExpect(_Strict):
    """Deep cuts among the rows shown (the step's gate); `include` must be chosen, `exclude`
    never, `none`: no row qualifies, so the answer must choose none."""

    include: list[RowId] = Field(default_factory=list, max_length=2)
    exclude: list[RowId] = Field(default_factory=list, max_length=30)
    none: bool = False


# --- the backpass -----------------------------------------------------------------


class AnalysisInput(_Strict):
    trace: str = Field(min_length=1, max_length=MAX_TRACE_CHARS)
    session: Short = "case-session"
    date: Short = "2026-01-01"


class AnalysisExpect(_Strict):
    """Every quote found verbatim in the trace (the quote check); at least `min_items`
    items; each of `mentions` in some item's text or quote (case-insensitive)."""

    min_items: int = Field(default=1, ge=0, le=6)
    mentions: list[Short] = Field(default_factory=list, max_length=10)
    positive: int = Field(default=0, ge=0, le=2, description="at least this many positive")
    negative: int = Field(default=0, ge=0, le=2)
    gaps: int = Field(default=0, ge=0, le=2)


class LedgerLine(_Strict):
    kind: Literal["positive", "negative", "gap"] = "positive"
    text: Text
    sessions: list[Short] = Field(min_length=1, max_length=20)


class BulletIn(_Strict):
    id: Annotated[str, Field(pattern=r"^(PUB|PRV)-\d{3,6}$")]
    text: Text


class SynthesisInput(_Strict):
    ledger: list[LedgerLine] = Field(min_length=1, max_length=40)
    public: list[BulletIn] = Field(default_factory=list, max_length=40)
    private: list[BulletIn] = Field(default_factory=list, max_length=40)
    min_sessions: int = Field(default=2, ge=1, le=20)
    date: Short = "2026-01-01"


class SynthesisExpect(_Strict):
    """Ids that exist (the step's gate); an edit citing the ledger line of each of `cites`
    (its text); no edit touching `untouched` bullets; at most `max_edits` edits."""

    cites: list[Text] = Field(default_factory=list, max_length=10)
    untouched: list[Annotated[str, Field(pattern=r"^(PUB|PRV)-\d{3,6}$")]] = Field(
        default_factory=list, max_length=40
    )
    max_edits: int | None = Field(default=None, ge=0, le=3)


# --- the build ----------------------------------------------------------------------


class BuildJob(_Strict):
    problem: Text
    traps: Text = "none"
    constraints: Text = "none"
    repo: Path_ = Field(description="a folder of the case: the build dir's files")
    spec_relative: Path_


class TestdesignInput(BuildJob):
    contract: Text
    language: Literal["python"] = "python"
    targets: list[Path_] = Field(default_factory=list, max_length=10)


class CodeInput(BuildJob):
    last_output: str = Field(default="", max_length=4000)


class BuildExpect(_Strict):
    """The answer applies to the repo (the build's own apply, the spec never changed); every
    Python file it writes compiles; `contains`: text the written files hold; `gone`: text
    no longer in the repo's files (the bug)."""

    contains: list[Text] = Field(default_factory=list, max_length=10)
    gone: list[Text] = Field(default_factory=list, max_length=10)


# --- the case ---------------------------------------------------------------------

INPUTS: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "terms": (TermsInput, TermsExpect),
    "score": (ScoreInput, ScoreExpect),
    "scotoma": (ScotomaInput, ScotomaExpect),
    "analysis": (AnalysisInput, AnalysisExpect),
    "synthesis": (SynthesisInput, SynthesisExpect),
    "testdesign": (TestdesignInput, BuildExpect),
    "code": (CodeInput, BuildExpect),
}


class StepCase(_Strict):
    """One step's input and the validators of its answer, checked against the step's models."""

    kind: Literal["step"]
    step: Literal["terms", "score", "scotoma", "analysis", "synthesis", "testdesign", "code"]
    input: dict[str, object]
    expect: dict[str, object] = Field(default_factory=dict)

    @property
    def pipeline(self) -> str:
        return PIPELINE[self.step]

    def parsed(self) -> tuple[BaseModel, BaseModel]:
        """(input, expect) as the step's typed models (already checked at load)."""
        given, wanted = INPUTS[self.step]
        return given.model_validate(self.input), wanted.model_validate(self.expect)

    def folders(self) -> dict[str, str]:
        """The folders the case names in its input (kb, repo), by field."""
        return {k: str(v) for k, v in self.input.items() if k in ("kb", "repo")}


def _cross_checked(step_input: BaseModel, expect: BaseModel) -> None:
    rows = getattr(step_input, "rows", None)
    if rows is not None:
        for field in ("high", "low", "include", "exclude"):
            _known(list(getattr(expect, field, []) or []), rows, field)
    if isinstance(step_input, SynthesisInput) and isinstance(expect, SynthesisExpect):
        texts = {line.text for line in step_input.ledger}
        missing = [text for text in expect.cites if text not in texts]
        if missing:
            raise ValueError(f"expect.cites names {missing}, which are not input.ledger texts")


def step_problems(case: StepCase) -> list[str]:
    """What is wrong with a step case's input and expect, each naming its field ([] : none)."""
    given, wanted = INPUTS[case.step]
    problems: list[str] = []
    checked: list[BaseModel] = []
    for part, model, raw in (("input", given, case.input), ("expect", wanted, case.expect)):
        try:
            checked.append(model.model_validate(raw))
        except ValidationError as exc:
            for error in exc.errors():
                where = ".".join(str(p) for p in (part, *error["loc"]))
                problems.append(f"{where}: {error['msg']}")
    if not problems:
        try:
            _cross_checked(*checked)
        except ValueError as exc:
            problems.append(str(exc))
    return problems

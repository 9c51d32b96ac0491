"""The case format: one folder per case, its `case.toml` checked by pydantic.

A suite is a folder whose subfolders each hold a `case.toml` and the files it
names (docs/replay.md, "Writing a suite"). Every path a case names is
relative to its own folder and must stay inside it; `kb = "@sample"` is the
shipped sample (its knowledge base, traces or memory repositories). A malformed case is a UsageError naming the
file and the field, so `bullpen eval` exits 2 before anything runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agents.evaluate.stepcases import StepCase, step_problems
from agents.intake.bounded import load_toml
from agents.intake.safecopy import CopyRefused, copy_tree, plan_tree
from agents.packaged import defaults
from room.errors import UsageError

CASE_FILE = "case.toml"
MAX_CASE_BYTES = 64 * 1024  # a case is a page of settings; its files are beside it
FOLDERS = ("kb", "hidden_tests", "repo", "traces", "public", "private")  # copied before a run
# the shipped samples are package folders (their __init__.py is the wheel's, not the case's)
SAMPLE_SKIPS = ("__pycache__", "__init__.py")
SAMPLE = "@sample"  # the shipped sample: its knowledge base, traces or memory repositories
SAMPLES = {
    "kb": "demo/kb",
    "traces": "demo/traces",
    "public": "demo/memory/public",
    "private": "demo/memory/private",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExpeditionExpect(_Strict):
    """What a good run finds: these deep cuts and voice anchors (files of the kb) in its
    Dig Report, and (optionally) these direct hits."""

    deep_cuts: list[str] = Field(default_factory=list)
    voice_anchors: list[str] = Field(default_factory=list)
    direct_hits: list[str] = Field(default_factory=list)


class ExpeditionCase(_Strict):
    kind: Literal["expedition"]
    title: str = Field(min_length=1)
    keyword: str = Field(min_length=1)
    kb: str = Field(min_length=1, description="the case's knowledge-base folder, or @sample")
    expect: ExpeditionExpect


REPO_MARK = "@REPO@"  # in a build case's ticket: the case's own build dir in the eval's root


class BuildCase(_Strict):
    """A ticket, and acceptance tests the seats never see, run on the green artifact.

    The ticket names its build dir as @REPO@ (the eval gives each case a folder of its
    own build root, so cases and evals never share one); `repo` is a folder of starting
    files (the spec, a stub) copied there first."""

    kind: Literal["build"]
    ticket: str = Field(min_length=1)
    hidden_tests: str = Field(min_length=1, description="a folder of pytest files")
    repo: str | None = Field(default=None, description="the build dir's starting files")


class BackpassExpect(_Strict):
    lessons: list[str] = Field(default_factory=list, description="text a kept lesson contains")
    quotes: list[str] = Field(default_factory=list, description="text a kept quote contains")


class BackpassCase(_Strict):
    """Traces and memory repos, and the lessons and quotes a good run keeps."""

    kind: Literal["backpass"]
    traces: str = Field(min_length=1, description="the folder of session transcripts")
    public: str = Field(min_length=1, description="the public memory repository")
    private: str | None = Field(default=None, description="the private memory repository")
    expect: BackpassExpect


AnyCase = ExpeditionCase | BuildCase | BackpassCase | StepCase
Case = Annotated[AnyCase, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[AnyCase] = TypeAdapter(Case)


class Loaded(BaseModel):
    """A checked case and where it lives."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    folder: Path
    case: AnyCase

    def value(self, field: str) -> str | None:
        """The folder or file the case names under `field` (a step case: in its input)."""
        if isinstance(self.case, StepCase):
            return self.case.folders().get(field)
        value = getattr(self.case, field, None)
        return value if isinstance(value, str) else None

    def path(self, value: str, field: str) -> Path:
        """A path the case names, resolved inside its folder (or the sample kb)."""
        if value == SAMPLE and field in SAMPLES:
            return defaults() / SAMPLES[field]
        target = (self.folder / value).resolve()
        if not target.is_relative_to(self.folder.resolve()):
            raise UsageError(
                f"{self.folder / CASE_FILE}: {field} = {value!r} leaves the case's folder; "
                "name a path inside it"
            )
        if not target.exists():
            raise UsageError(f"{self.folder / CASE_FILE}: {field} = {value!r} does not exist")
        return target

    def copy_folder(self, field: str, target: Path, skip: tuple[str, ...] = SAMPLE_SKIPS) -> Path:
        """The folder the case's `field` names, copied to the new folder `target` by the one
        safe copy (agents/intake/safecopy.py): a link out of it, or too much, is refused
        with exit 2 naming it, before a byte is copied."""
        target.parent.mkdir(parents=True, exist_ok=True)
        value = self.value(field)
        if value is None:
            raise UsageError(f"{self.folder / CASE_FILE}: names no {field}")
        copy_tree(self.path(value, field), target, what=self.copier, skip=skip)
        return target

    def in_round(self, number: int) -> Loaded:
        """The case as round `number` of `--rounds` runs it: its copies (kb, traces, build
        dir) under a name of their own, so no round copies over another's."""
        return self if number == 1 else self.model_copy(update={"name": f"{self.name}-r{number}"})

    @property
    def copier(self) -> str:
        return f"bullpen eval (case {self.name})"

    def check_folders(self) -> None:
        """Every folder the case names planned as its copy will be: a link out of it, or
        too much, is refused now, before any society starts."""
        for field in FOLDERS:
            value = self.value(field)
            if value is not None:
                source = self.path(value, field)
                try:
                    plan_tree(source, what=self.copier, skip=("__pycache__",))
                except CopyRefused as exc:
                    message = f"{self.folder / CASE_FILE}: {field}: {exc.message}"
                    raise CopyRefused(message, **exc.details) from None


def _where(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("expedition", "build", "backpass", "step"):
        parts = parts[1:]  # the union's tag pydantic puts first
    return ".".join(parts) or "kind"


def load_case(folder: Path) -> Loaded:
    """One case folder, checked; UsageError naming the file and the field."""
    file = folder / CASE_FILE
    raw = load_toml(file, MAX_CASE_BYTES, "the case")
    try:
        case = _ADAPTER.validate_python(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            if error["type"] in ("union_tag_not_found", "union_tag_invalid"):
                problems.append('kind: set kind = "expedition", "build", "backpass" or "step"')
            else:
                problems.append(f"{_where(error['loc'])}: {error['msg']}")
        raise UsageError(f"{file}: " + "; ".join(problems)) from None
    if isinstance(case, StepCase) and (problems := step_problems(case)):
        raise UsageError(f"{file}: " + "; ".join(problems))
    loaded = Loaded(name=folder.name, folder=folder, case=case)
    for field in ("kb", "ticket", "hidden_tests", "repo", "traces", "public", "private"):
        value = loaded.value(field)
        if value is not None:
            loaded.path(value, field)
    loaded.check_folders()
    return loaded


def suite_folder(name: str) -> Path:
    """A suite by path, or by the name of a shipped one (config/eval/NAME)."""
    given = Path(name)
    if given.is_dir():
        return given
    shipped = defaults() / "eval" / name
    if "/" not in name and shipped.is_dir():
        return shipped
    raise UsageError(
        f"no suite folder {name!r}: give a folder of cases (each with a {CASE_FILE}) or a "
        "shipped suite's name (example)"
    )


def private_folders(cases: list[Loaded]) -> list[Path]:
    """The folders no seat or model-written code may read: the build cases' acceptance
    tests (the eval's [build] hidden, which every fence hides)."""
    found = []
    for loaded in cases:
        if isinstance(loaded.case, BuildCase):
            found.append(loaded.path(loaded.case.hidden_tests, "hidden_tests"))
    return list(dict.fromkeys(found))


def load_suite(name: str) -> list[Loaded]:
    """Every case of the suite, in name order; UsageError on the first malformed one."""
    folder = suite_folder(name)
    cases = [load_case(sub) for sub in sorted(folder.iterdir()) if (sub / CASE_FILE).is_file()]
    if not cases:
        raise UsageError(f"the suite {folder} holds no case: no subfolder has a {CASE_FILE}")
    return cases

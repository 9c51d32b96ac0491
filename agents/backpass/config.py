"""The `[backpass]` section of society.toml, and the parameters one run carries.

Every path is relative to the home unless absolute; `ledger` and
`memory_file` are relative to their repository. The operator's command
resolves the section (plus its command-line overrides) into RunParams with
absolute paths and posts them in the run's starting ask, so the room
records exactly what a run used, and every step reads them from its ask.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from agents.config import parse_section
from agents.roots import OutsideRoot, Roots
from room.errors import ConfigError

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["BackpassConfig", "RunParams", "run_dir"]

SeatRole = Literal["bulk", "synthesis"]  # the backpass's two judged roles

PATH_KEYS = (
    "public",
    "private",
    "traces",
    "state",
    "analysis_prompt",
    "synthesis_prompt",
    "runs",
)
# The [roots] purpose each path parameter must lie under (agents/roots.py).
ROOT_OF = {
    "public": "memory",
    "private": "memory",
    "traces": "traces",
    "state": "state",
    "analysis_prompt": "prompts",
    "synthesis_prompt": "prompts",
    "runs": "runs",
}


class BackpassConfig(BaseModel):
    """How the memory backpass runs in this home."""

    model_config = ConfigDict(extra="forbid")

    public: str = Field(default="memory/public", description="git repository of public memory")
    private: str = Field(default="memory/private", description="git repository of private memory")
    private_nick: str | None = Field(
        default=None,
        description="the nick whose lessons the private bullets are (`bullpen memory sync`)",
    )
    memory_file: str = Field(default="memory.md", description="the bullets file in each repository")
    ledger: str = Field(
        default="ledger.md", description="the ledger, inside the private repository"
    )
    traces: str = Field(default="traces", description="session transcripts, searched recursively")
    state: str = Field(default="state/backpass.sha256", description="`sha256  path` lines")
    analysis_prompt: str = "prompts/analysis-prompt.md"
    synthesis_prompt: str = "prompts/synthesis-prompt.md"
    runs: str = Field(default="runs", description="per-run artifacts and worktrees")
    concurrency: int = Field(default=4, ge=1, le=64, description="analyses in flight at once")
    timeout_s: float = Field(
        default=600.0,
        gt=0,
        allow_inf_nan=False,  # an infinite limit is no limit, and JSON cannot carry it
        description="hard limit on one bulk call (a chunk of a long trace), retry and fallback",
    )
    timeout_margin_s: float = Field(
        default=60.0, ge=0, allow_inf_nan=False, description="added before overdue"
    )
    max_traces: int = Field(default=200, ge=1, le=500, description="per run; the rest wait")
    max_trace_chars: int = Field(
        default=4_000_000,
        ge=1000,
        description="the longest trace a run reads at all (its file may be 8 bytes a character)",
    )
    context_chars: int = Field(
        default=400_000,
        ge=1000,
        description="trace characters one bulk call is shown; a longer trace goes in chunks",
    )
    context_tokens: int | None = Field(
        default=None,
        ge=3000,  # the analysis' answer keeps 2,100 of them (agents/backpass/prompts.py)
        description="the bulk model's context in tokens; when set, it decides the chunk size",
    )
    chunk_overlap_chars: int = Field(
        default=4000, ge=0, description="how far each chunk of a long trace repeats the last"
    )
    max_age_days: int = Field(default=90, ge=1, description="prune open lines unseen this long")
    match_threshold: float = Field(default=0.6, gt=0, le=1)
    cover_threshold: float = Field(default=0.8, gt=0, le=1)
    min_sessions: int = Field(default=2, ge=1, description="sessions before a line is promoted")
    branch_prefix: str = Field(default="memory-backpass", pattern=r"^[a-z0-9][a-z0-9._-]{0,40}$")
    keep_worktrees: bool = Field(default=True, description="leave worktrees for review")
    drop_warn_rate: float = Field(default=0.10, ge=0, le=1)

    @model_validator(mode="after")
    def _overlap(self) -> BackpassConfig:
        if self.chunk_overlap_chars * 4 > self.context_chars:
            raise ValueError(
                f"chunk_overlap_chars ({self.chunk_overlap_chars}) is over a quarter of "
                f"context_chars ({self.context_chars}); lower it, or chunks would mostly repeat"
            )
        return self

    @field_validator("memory_file", "ledger")
    @classmethod
    def _in_repository(cls, value: str) -> str:
        """A file inside its repository: relative, and never climbing out with `..`."""
        parts = Path(value).parts
        if not parts or Path(value).is_absolute() or ".." in parts:
            raise ValueError(
                f"{value!r} must be a path inside the memory repository, like 'memory.md' "
                "(relative, without '..')"
            )
        return value

    def roots(self, home: Home) -> Roots:
        """The roots this section's paths must lie under; ConfigError when one does not."""
        state = home.path(self.state).resolve()
        return Roots.of(
            home,
            {
                "traces": [("[backpass] traces", self.traces)],
                "state": [("the folder of [backpass] state", state.parent)],
                "runs": [("[backpass] runs", self.runs)],
                "memory": [
                    ("[backpass] public", self.public),
                    ("[backpass] private", self.private),
                ],
                "prompts": [
                    ("[backpass] analysis_prompt", self.analysis_prompt),
                    ("[backpass] synthesis_prompt", self.synthesis_prompt),
                ],
            },
        )

    @classmethod
    def from_home(cls, home: Home) -> BackpassConfig:
        """The home's `[backpass]` section, checked; a ConfigError says what to fix."""
        return parse_section(cls, home.society.backpass, "backpass", home.society_file)

    def run_params(self, home: Home, *, report_only: bool = False, **overrides: Any) -> RunParams:
        """This configuration with `overrides` (None ones ignored) and every path absolute."""
        values = self.model_dump()
        unknown = sorted(set(overrides) - set(values))
        if unknown:
            raise TypeError(
                f"run_params() got unknown overrides {unknown}; use the [backpass] key names"
            )
        values.update({key: value for key, value in overrides.items() if value is not None})
        for key in PATH_KEYS:
            values[key] = str(home.path(str(values[key])).resolve())
        values["report_only"] = report_only
        try:
            return RunParams.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ConfigError(
                f"backpass option {where}: {first['msg'].removeprefix('Value error, ')}"
            ) from None


class RunParams(BackpassConfig):
    """One run's parameters, as the starting ask carries them and every step reads them."""

    model_config = ConfigDict(extra="ignore")  # the ask also holds "pipeline" and the runtime's key

    report_only: bool = False
    seats: dict[SeatRole, str] = Field(
        default_factory=dict, description="this run's seat for a role, chosen by option or env"
    )
    seat_choice: dict[SeatRole, str] = Field(
        default_factory=dict, description="how each chosen seat was chosen, for the report"
    )

    def path(self, home: Home, key: str) -> Path:
        """One of the path parameters, absolute (relative ones resolved against the home)."""
        return home.path(str(getattr(self, key))).resolve()

    def confine(self, home: Home) -> Roots:
        """The home's roots, once every path parameter is known to lie under its own.

        The parameters come from an ask, which anyone privileged may write (through
        the relaxed listener too): a step checks them against society.toml's roots
        before it reads or writes anything. OutsideRoot names the path and the root."""
        roots = BackpassConfig.from_home(home).roots(home)
        for key in PATH_KEYS:
            try:
                roots.check(ROOT_OF[key], home.path(str(getattr(self, key))), f"the backpass {key}")
            except OutsideRoot as exc:
                exc.details["key"] = key  # which parameter, for the command's message
                raise
        return roots


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def run_dir(runs_root: Path, thread: str) -> Path:
    """Where a run's artifacts live: one folder per thread, its name made filesystem-safe."""
    name = _UNSAFE.sub("_", thread).lstrip(".") or "run"
    return runs_root / name

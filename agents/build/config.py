"""The `[build]` section of society.toml: where build dirs live and how grinds climb.

Everything particular to one machine lives here, not in code: the build
root, the fixed alias, the standing tier ladder (the grinder unit's
`BULLPEN_GRIND_TIERS` wins over `tiers`), the stall and iteration bounds,
the runner commands and the fence.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agents.config import parse_section

if TYPE_CHECKING:
    from agents.home import Home

TIERS_ENV = "BULLPEN_GRIND_TIERS"
# A lurker's own build root (its unit's environment): a grinder on another host, or beside
# the others with a folder of its own, keeps its build dirs there; what it is handed arrives
# as a bundle (agents/build/handoff.py).
ROOT_ENV = "BULLPEN_BUILD_ROOT"
SEAT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def split_tiers(text: str) -> list[str]:
    """`floor,…,ceiling` as seat names; ValueError naming a name that is not one."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    for name in names:
        if not SEAT_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a seat name (letters, digits, '-' and '_')")
    return names


def _absolute_path(value: str) -> str:
    if not os.path.isabs(value):
        raise ValueError(f"{value!r} must be an absolute path, like /tmp/bullpen-build")
    return os.path.normpath(value)


class BuildConfig(BaseModel):
    """How builds run in this home."""

    model_config = ConfigDict(extra="forbid")

    root: str = Field(default="/tmp/bullpen-build", description="every build dir lies under it")
    alias: str = Field(default="/tmp/sandbox", description="pointed at the campaign's dir")
    tiers: list[str] = Field(default_factory=list, description="the standing ladder, floor first")
    stall_after: int = Field(default=2, ge=1, le=50)
    max_iterations: int = Field(default=6, ge=1, le=200, description="per tier")
    grind_timeout_s: float = Field(default=1800.0, gt=0, description="the whole grind")
    run_timeout_s: float = Field(default=120.0, gt=0, description="one test run")
    max_files: int = Field(default=50, ge=1, description="a non-git dir with more is refused")
    fence: Literal["auto", "bwrap", "rlimits"] = "auto"
    seat_fence: Literal["guarded", "strict"] = Field(
        default="guarded",
        description="a cmd code seat behind bwrap: 'guarded' hides the home's secrets and keeps "
        "the build root read-only but the clone; 'strict' makes all read-only but the clone "
        "and the seat's writable paths, and hides the whole home",
    )
    hidden: list[str] = Field(
        default_factory=list,
        description="more places every fence hides (a code seat under either seat_fence, every "
        "test run): private data outside the home, e.g. an eval's acceptance tests",
    )
    memory_mb: int = Field(default=4096, ge=64)
    cpu_s: int = Field(default=300, ge=1)
    file_size_mb: int = Field(default=256, ge=1)
    processes: int = Field(
        default=4096, ge=16, description="processes and threads of one test run, root included"
    )
    disk_mb: int = Field(
        default=2048, ge=1, description="bytes one test run may add to the clone and its cache"
    )
    node_path: str = Field(default="/usr/lib/node_modules", description="NODE_PATH for node")
    runners: dict[str, list[str]] = Field(
        default_factory=dict, description="a language's runner command, e.g. go = ['go', 'test']"
    )
    testdesign_seat: str = Field(default="testdesign", description="the seat that writes specs")
    prompt_tokens: int = Field(
        default=12000,
        ge=500,
        le=1_000_000,
        description="what a code seat's prompt may spend on the repository's map and files "
        "(about 4 characters a token); what does not fit is named as left out",
    )

    @field_validator("tiers")
    @classmethod
    def _tiers(cls, value: list[str]) -> list[str]:
        return split_tiers(",".join(value))

    @field_validator("root", "alias")
    @classmethod
    def _absolute(cls, value: str) -> str:
        return _absolute_path(value)

    @field_validator("hidden")
    @classmethod
    def _absolutes(cls, value: list[str]) -> list[str]:
        return [_absolute_path(place) for place in value]

    @classmethod
    def of(cls, home: Home) -> BuildConfig:
        """The home's `[build]` section as typed settings; a ConfigError says what to fix.
        $BULLPEN_BUILD_ROOT, when set, is this process's root instead of `[build] root`."""
        table = dict(home.society.build)
        if os.environ.get(ROOT_ENV, "").strip():
            table["root"] = os.environ[ROOT_ENV].strip()
        return parse_section(cls, table, "build", home.society_file)

    def standing_tiers(self, environ: dict[str, str] | None = None) -> list[str]:
        """The unit's BULLPEN_GRIND_TIERS (policy), else `[build] tiers`."""
        value = (environ if environ is not None else os.environ).get(TIERS_ENV, "")
        return split_tiers(value) if value.strip() else list(self.tiers)

    @property
    def root_path(self) -> Path:
        return Path(self.root)

"""The `[expedition]` section of society.toml.

Everything particular to one operator or one machine lives here, not in
code: where the knowledge base and the briefs folder are, and the names the
third-person digest gate looks for. Paths are relative to the home.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.config import parse_section
from agents.roots import Roots
from room.errors import ConfigError

if TYPE_CHECKING:
    from agents.home import Home

JudgedStep = Literal["termgen", "score", "scotoma"]


class ExpeditionConfig(BaseModel):
    """How expeditions run in this home."""

    model_config = ConfigDict(extra="forbid")

    kb: str = Field(default="kb", description="the knowledge-base folder holding corpus_index.md")
    briefs: str = Field(default="briefs", description="where confirmed briefs are written")
    operator_names: list[str] = Field(
        default_factory=list,
        description="how the corpus names the operator in third person, e.g. ['Avery']",
    )
    digest_verbs: list[str] = Field(
        default_factory=lambda: ["recounts", "reflects", "records", "describes"],
        min_length=1,
    )
    batch_size: int = Field(default=10, ge=1, le=50)
    max_candidates: int = Field(default=40, ge=1, le=500)
    top_for_scotoma: int = Field(default=8, ge=1, le=30)
    excerpt_min_words: int = Field(default=150, ge=1)
    excerpt_max_words: int = Field(default=500, ge=1)
    digest_similarity: float = Field(default=0.8, gt=0, le=1)
    digest_prefix_chars: int = Field(default=200, ge=20)
    voice_anchor_paragraphs: int = Field(default=2, ge=1)
    voice_anchors_wanted: int = Field(
        default=3, ge=0, le=20, description="step 5 reads further lived rows until this many"
    )
    guidance: dict[JudgedStep, str] = Field(
        default_factory=dict, description="extra instructions for one judged step's prompt"
    )

    @model_validator(mode="after")
    def _bounds(self) -> ExpeditionConfig:
        if self.excerpt_min_words > self.excerpt_max_words:
            raise ValueError(
                f"excerpt_min_words ({self.excerpt_min_words}) is above excerpt_max_words "
                f"({self.excerpt_max_words}); lower the first or raise the second"
            )
        if any(not name.strip() for name in self.operator_names):
            raise ValueError("operator_names has an empty name; remove it")
        return self

    @classmethod
    def of(cls, home: Home) -> ExpeditionConfig:
        """The home's `[expedition]` section as typed settings; a ConfigError says what to fix."""
        return parse_section(cls, home.society.expedition, "expedition", home.society_file)

    @classmethod
    def from_home(cls, home: Home) -> ExpeditionConfig:
        """The section, checked for running an expedition: it must name the operator."""
        config = cls.of(home)
        if not config.operator_names:
            raise ConfigError(
                f"{home.society_file}: [expedition] operator_names is empty; list how the "
                'corpus names you in third person, e.g. operator_names = ["Avery"], so '
                "digest narration can be told from first-person prose"
            )
        return config

    def roots(self, home: Home) -> Roots:
        """The kb, blaze and briefs roots; ConfigError when this section's paths lie outside."""
        return Roots.of(
            home,
            {
                "kb": [("[expedition] kb", self.kb)],
                "blaze": [("[expedition] kb", self.kb)],  # the sample's blaze lies in kb/
                "briefs": [("[expedition] briefs", self.briefs)],
            },
        )

    def paths(
        self,
        home: Home,
        kb: str | None = None,
        blaze: str | None = None,
        briefs: str | None = None,
    ) -> RunPaths:
        """A run's folders and blaze: what it asks for, only ever narrowed to inside the roots.

        Paths in an ask are data from a poster (a privileged nick may write any ask,
        through the relaxed listener too), so the command checks them before posting and
        every step that reads or writes one checks it again. OutsideRoot names the path."""
        roots = self.roots(home)
        return RunPaths(
            roots,
            kb=roots.narrow("kb", kb, home.path(self.kb), "the knowledge base"),
            briefs=roots.narrow("briefs", briefs, home.path(self.briefs), "the briefs folder"),
            blaze=roots.check("blaze", blaze, "the blaze file") if blaze else None,
        )

    def limits(self) -> dict[str, int]:
        """The bounds the foreman needs to fan out and cut, carried in the run itself."""
        return {
            "batch_size": self.batch_size,
            "max_candidates": self.max_candidates,
            "top_for_scotoma": self.top_for_scotoma,
        }


def resolve_path(home: Home, value: str | None, default: str) -> Path:
    """A path from a run (absolute, or relative to the home), else the configured one."""
    return home.path(value or default).resolve()


@dataclass(frozen=True)
class RunPaths:
    """One run's knowledge base, briefs folder and blaze, each checked against its root."""

    roots: Roots
    kb: Path
    briefs: Path
    blaze: Path | None

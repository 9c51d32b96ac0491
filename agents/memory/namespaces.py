"""Namespaces: the `/bullpen/...` paths memory is filed under, and the `[memory]` section.

A namespace only helps if it is anchored, so every one is declared in
`[memory.namespaces]` of society.toml with a line saying what belongs there;
a save to an undeclared one is refused with the declared list, and a save with
no namespace is refused outright (there is no default for entries to pile into).

A query's namespace is a prefix filter on whole segments: `/bullpen/ops`
matches `/bullpen/ops` and `/bullpen/ops/x`, never `/bullpen/opsx`.

The lessons namespaces are handed to prompts unasked ("follow them"), so
they are guarded: `/bullpen/lessons-learned/<nick>` (and below) takes saves
from that nick and the keepers only, `/bullpen/lessons-learned` itself (handed
to every nick) from the keepers only. The keepers are the operator, who is
also the poster of the backpass's sync (agents/librarian/sync.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from agents.config import parse_section
from agents.memory.errors import Refused
from agents.memory.query import DEADLINE_S
from room.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

    from agents.home import Home

__all__ = [
    "GENERAL_LESSONS",
    "ROOT",
    "MemoryConfig",
    "Namespaces",
    "keepers",
    "lessons_ns",
    "lessons_owner",
    "normalize",
    "prefix_range",
    "writer_refusal",
]

ROOT = "/bullpen"
GENERAL_LESSONS = "/bullpen/lessons-learned"
MAX_NS = 200
_SEGMENT = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")

# What `bullpen init` declares (the seed's namespaces), and what belongs in each.
SEED_NAMESPACES: dict[str, str] = {
    "/bullpen/lessons-learned": "general lessons every agent is handed on each wake (top 2)",
    "/bullpen/sandbox": "the campaign-sandbox convention: build dirs, host boundary, tickets",
    "/bullpen/ops": "standing operational facts and policy, not tied to one failure",
    "/bullpen/research": "cited findings and durable synthesis, not raw fetch output",
    "/bullpen/artifacts": "raw fetch-cache pointers (URL -> local cache path)",
}


def lessons_ns(nick: str) -> str:
    """The namespace of one nick's own lessons, handed to it on every wake."""
    return f"{GENERAL_LESSONS}/{nick}"


def lessons_owner(ns: str) -> str | None:
    """Whose lessons a canonical namespace holds: the nick for lessons-learned/<nick> and
    below, "" for lessons-learned itself (every nick's), None for any other namespace."""
    if ns == GENERAL_LESSONS:
        return ""
    if ns.startswith(GENERAL_LESSONS + "/"):
        return ns[len(GENERAL_LESSONS) + 1 :].split("/")[0]
    return None


def writer_refusal(ns: str, poster: str, keepers: frozenset[str]) -> str | None:
    """Why `poster` may not save into (or supersede an entry of) `ns`; None when it may."""
    owner = lessons_owner(ns)
    if owner is None or poster in keepers or (owner and poster == owner):
        return None
    keeper_list = ", ".join(f"@{k}" for k in sorted(keepers))
    if owner:
        return (
            f"{ns} holds @{owner}'s lessons, handed to @{owner} on every wake; only @{owner} "
            f"and the operator ({keeper_list}, who also posts the backpass sync) may save "
            f"there, not @{poster}. Save to {lessons_ns(poster)} or a shared namespace such "
            f"as /bullpen/ops, or ask @{owner} or the operator"
        )
    return (
        f"{ns} holds the general lessons handed to every nick on every wake; only the "
        f"operator ({keeper_list}, who also posts the backpass sync) may save there, not "
        f"@{poster}. Save to {lessons_ns(poster)}, or ask the operator"
    )


def keepers(home: Home) -> frozenset[str]:
    """Who may save into every lessons namespace: the operator, which is also the nick the
    backpass's sync posts as (agents/librarian/sync.py)."""
    return frozenset({home.society.operator})


def normalize(ns: object, what: str = "ns") -> str:
    """`ns` as a canonical path under /bullpen (no trailing slash), or Refused saying why."""
    if not isinstance(ns, str) or not ns.strip():
        raise Refused(
            f"{what} is missing: every entry needs an explicit namespace under {ROOT}, "
            "e.g. /bullpen/ops (`bullpen memory namespaces` lists the declared ones)"
        )
    value = ns.strip()
    if len(value) > MAX_NS:
        raise Refused(f"{what} is {len(value)} characters long; keep it under {MAX_NS}")
    if value != ROOT and not value.startswith(ROOT + "/"):
        raise Refused(
            f"{what} {value!r} is outside {ROOT}: every namespace is a path under it, "
            "like /bullpen/ops"
        )
    value = value.rstrip("/") or ROOT
    for segment in value.split("/")[2:]:
        if not _SEGMENT.fullmatch(segment):
            raise Refused(
                f"{what} {value!r} has a bad segment {segment!r}: use lowercase letters, "
                "digits, '.', '_' or '-', starting with a letter or digit"
            )
    return value


def prefix_range(prefix: str) -> tuple[str, str, str]:
    """(exact, low, high) for SQL: `ns = exact OR (ns >= low AND ns < high)` is the
    whole-segment prefix match ('0' sorts right after '/'), and it can use an index."""
    return prefix, prefix + "/", prefix + "0"


def covers(prefix: str, ns: str) -> bool:
    """Whether a query for `prefix` sees an entry filed under `ns`."""
    return ns == prefix or ns.startswith(prefix + "/")


class MemoryConfig(BaseModel):
    """`[memory]` of society.toml."""

    model_config = ConfigDict(extra="forbid")

    index: str = Field(default="state/memory.sqlite", description="the librarian's SQLite index")
    librarian: str = Field(default="librarian", description="the nick saves are addressed to")
    query_deadline_s: float = Field(
        default=DEADLINE_S, gt=0, le=60, description="the most a recall query may run (query.py)"
    )
    namespaces: dict[str, str] = Field(default_factory=dict)


@dataclass(frozen=True)
class Namespaces:
    """The declared namespaces of a home, each with what belongs there."""

    declared: dict[str, str]

    @classmethod
    def of(cls, config: MemoryConfig, society_file: Path | None = None) -> Namespaces:
        declared: dict[str, str] = {}
        for key, meaning in config.namespaces.items():
            path = key if key.startswith("/") else f"{ROOT}/{key}"
            try:
                declared[normalize(path, f"[memory.namespaces] {key!r}")] = meaning
            except Refused as exc:
                where = f"{society_file}: " if society_file else ""
                raise ConfigError(where + exc.message) from None
        return cls(declared)

    def check(self, ns: object) -> str:
        """The canonical declared namespace, or Refused listing the declared ones."""
        value = normalize(ns)
        if value not in self.declared:
            listed = ", ".join(sorted(self.declared)) or "none (add [memory.namespaces])"
            raise Refused(
                f"namespace {value} is not declared in [memory.namespaces] of society.toml; an "
                f"unanchored namespace is as lost as none. Declared: {listed}",
                declared=sorted(self.declared),
            )
        return value


def memory_config(home: Home) -> MemoryConfig:
    """The home's `[memory]` section, checked."""
    return parse_section(MemoryConfig, home.society.memory, "memory", home.society_file)


def namespaces(home: Home) -> Namespaces:
    return Namespaces.of(memory_config(home), home.society_file)


def index_path(home: Home) -> Path:
    return home.path(memory_config(home).index)

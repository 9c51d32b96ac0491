"""The §8.3 ticket checks: sections in order, a SPEC path, a REPO under the build root,
STEP 1 naming that spec with a no-regression clause, and tiers that name seats.

Code, no model, and no file: the foreman runs these on the ticket's text
and, if anything is wrong, ends the run at once with
`INVALID TICKET — <what is wrong and how to fix it>`; nothing is dispatched
and nothing is written. `bullpen build` runs the same checks first and posts
nothing at all for an invalid ticket. The paths are checked as written (the foreman opens
nothing); the sandbox step checks them again with every link followed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import dataclass, field

from agents.build.config import BuildConfig, split_tiers
from agents.build.routing import Language, kinds, route

__all__ = [
    "CLOSING",
    "MAX_TICKET_BYTES",
    "SECTIONS",
    "Ticket",
    "TicketError",
    "parse_ticket",
    "system_reason",
]

MAX_TICKET_BYTES = 60 * 1024  # a ticket is a page: refused from its size, never read past it
SECTIONS = ("PROBLEM", "REPO", "TRAPS", "STEP 1", "STEP 2", "Constraints")
CLOSING = "Dispatch, then END YOUR TURN."
_HEADER = re.compile(
    r"^\s*(?:#+\s*|\d+\.\s*)?(PROBLEM|REPO|TRAPS|STEP\s*1|STEP\s*2|Constraints)\b\s*[:—–-]?\s*(.*)$",
    re.I,
)
_SPEC = re.compile(r"\bSPEC:\s*(\S+)")
_TIERS = re.compile(r"\btiers\s*=\s*([^\s]+)")
_TARGETS = re.compile(r"^\s*targets:\s*(.+)$", re.M | re.I)
_NICK = re.compile(r"@([a-z][a-z0-9_-]*)")
_PATH = re.compile(r"(/[^\s,;()]*)")
# A no-regression clause (§8.3): "no regression", "no-regression", "must not regress",
# "existing tests still pass", or a back-compat case.
_NO_REGRESSION = re.compile(
    r"\bregress|\bstill\s+pass|\bback[\s-]*(?:ward[\s-]*)?compat|\bunchanged\b", re.I
)
# The system's own trees, which nothing of a build may write, and the places that hold
# users', services' and mounts' files: no build dir under either (a code seat's own
# state may lie inside the second kind, never be one of them: agents/build/codeseat.py).
OS_TREES = (
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev",
    "/proc", "/sys",
)  # fmt: skip
SHARED_AREAS = ("/home", "/root", "/run", "/var", "/opt", "/srv", "/snap", "/mnt", "/media")
SYSTEM_DIRS = (*SHARED_AREAS, *OS_TREES)
TEMP_DIRS = ("/tmp", "/var/tmp")
RULE = (
    "the build dir must live under /tmp (`bullpen docs build`, the build-dir rules): a model-written "
    "test and its fix run there, so /home and system paths are never used"
)


class TicketError(ValueError):
    """What is wrong with a ticket and how to fix it: the INVALID TICKET text."""


class UnknownSeats(TicketError):
    """`tiers=` names seats the config lacks; `unknown` lets the foreman tell a typo from a
    seat added to society.toml since it started (agents/build/pipeline.py)."""

    def __init__(self, message: str, unknown: list[str]) -> None:
        super().__init__(message)
        self.unknown = unknown


@dataclass(frozen=True)
class Ticket:
    """A checked ticket: its sections' text, the paths, and the grind's parameters."""

    sections: dict[str, str]
    repo: str
    spec: str
    spec_relative: str
    language: Language
    targets: list[str] = field(default_factory=list)
    tiers: list[str] = field(default_factory=list)
    addressed: str | None = None  # the grinder nick the ticket names, if any

    @property
    def routed_away(self) -> bool:
        return self.addressed is not None and self.addressed != self.language.nick


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def system_reason(path: str) -> str | None:
    """Why `path` (absolute, normalised) may not hold a build dir, or None."""
    if path == "/":
        return f"{path} is the filesystem's root; {RULE}"
    if any(_inside(temp, path) for temp in TEMP_DIRS):
        return None
    for system in SYSTEM_DIRS:
        if _inside(system, path):
            return f"{path} lies under {system}; {RULE}"
    return f"{path} lies outside /tmp; {RULE}"


def _squash(name: str) -> str:
    return name.replace(" ", "").lower()


def _split(text: str) -> tuple[dict[str, str], list[str]]:
    sections: dict[str, list[str]] = {}
    order: list[str] = []
    current: str | None = None
    problems: list[str] = []
    for line in text.splitlines():
        match = _HEADER.match(line)
        if match:
            name = next(s for s in SECTIONS if _squash(s) == _squash(match[1]))
            if name in sections:
                problems.append(f"the section {name} appears twice; keep one")
            current = name
            order.append(name)
            sections.setdefault(name, []).append(match[2])
        elif current is not None:
            sections[current].append(line)
    found = {
        name: "\n".join(lines).replace(CLOSING, "").strip() for name, lines in sections.items()
    }
    for name in SECTIONS:
        if name not in found:
            problems.append(f"the section {name} is missing; add it ({' → '.join(SECTIONS)})")
        elif not found[name]:
            problems.append(f"the section {name} is empty; say {_WHAT[name]}")
    seen = [name for name in dict.fromkeys(order) if name in SECTIONS]
    expected = [name for name in SECTIONS if name in seen]
    if seen != expected:
        problems.append(
            f"the sections are out of order ({' → '.join(seen)}); put them as {' → '.join(SECTIONS)}"
        )
    return found, problems


def title(text: str, limit: int = 120) -> str:
    """A run's title: the first line of the ticket's PROBLEM text, not its header.

    Every ticket opens with the header PROBLEM, so titling runs by their first line named
    them all "build: PROBLEM" in the room, the demo and the Runs page."""
    sections, _ = _split(text)
    words = " ".join((sections.get("PROBLEM") or "").split())
    if not words:
        lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
        words = lines[0] if lines else ""
    return words if len(words) <= limit else words[: limit - 1].rstrip() + "…"


_WHAT = {
    "PROBLEM": "the symptom in one or two sentences, in user terms",
    "REPO": "the build dir, e.g. /tmp/sandbox (prepared and git-initialised)",
    "TRAPS": "the plausible-but-wrong fixes, or 'none known'",
    "STEP 1": "@testdesigner, the test path and the acceptance contract",
    "STEP 2": "SPEC: <absolute path of the spec>",
    "Constraints": "what must not be touched, or 'none'",
}


def _check_step1(step1: str, repo: str, spec: str, config: BuildConfig) -> None:
    """STEP 1 names the spec's path under REPO (or the alias) and a no-regression clause."""
    named = [os.path.normpath(p.rstrip(".:")) for p in _PATH.findall(step1)]
    relative = os.path.relpath(spec, repo)
    under = [
        os.path.relpath(path, root)
        for path in named
        for root in dict.fromkeys((repo, config.alias))
        if _inside(root, path) and path != root
    ]
    if not under:
        raise TicketError(
            f"STEP 1 names no test path under REPO {repo}; write @testdesigner: the spec at "
            f"{spec} covers … (the acceptance contract)"
        )
    if relative not in under:
        raise TicketError(
            f"STEP 1 names {', '.join(named)} but STEP 2's SPEC is {spec}; the test @testdesigner "
            "writes is the one the grinder runs, so name the same path in both"
        )
    if not _NO_REGRESSION.search(step1):
        raise TicketError(
            "STEP 1's acceptance contract has no no-regression clause; add one, e.g. 'and no "
            "regression: the existing tests still pass' (`bullpen docs build`, ticket rules)"
        )


def parse_ticket(text: str, config: BuildConfig, seats: Collection[str] | None = None) -> Ticket:
    """The checked ticket, or TicketError saying what is wrong with it. `seats`: the
    configured seat names, which `tiers=` must name (None: not checked)."""
    sections, problems = _split(text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or lines[-1].strip("\"'“”") != CLOSING:
        problems.append(f"the ticket must end with the line {CLOSING!r}")
    if problems:
        raise TicketError("; ".join(problems))
    repo_match = _PATH.search(sections["REPO"])
    if repo_match is None:
        raise TicketError(f"REPO names no absolute path; write it as {config.alias} (the alias)")
    repo = os.path.normpath(repo_match[1])
    reason = system_reason(repo)
    if reason is not None:
        raise TicketError(f"REPO {reason}")
    if not (_inside(config.root, repo) or _inside(config.alias, repo)):
        raise TicketError(
            f"REPO {repo} lies outside the build root {config.root} (and is not the alias "
            f"{config.alias}); put the build dir under {config.root} and write REPO {config.alias}"
        )
    step2 = sections["STEP 2"]
    spec_match = _SPEC.search(step2)
    if spec_match is None:
        raise TicketError(
            f"STEP 2 has no SPEC: <absolute path>; a prose-only grind cannot be routed. Add a "
            f"line like SPEC: {repo}/tests/test_feature.py"
        )
    spec = spec_match[1]
    if not os.path.isabs(spec):
        raise TicketError(f"SPEC {spec} is not an absolute path; write it as {repo}/{spec}")
    spec = os.path.normpath(spec)
    if not _inside(repo, spec) or spec == repo:
        raise TicketError(f"SPEC {spec} does not lie in REPO {repo}; put the spec inside the REPO")
    relative = os.path.relpath(spec, repo)
    language = route(relative)
    if language is None:
        raise TicketError(f"no grinder runs the SPEC {relative}: the file types are {kinds()}")
    tiers: list[str] = []
    if tiers_match := _TIERS.search(step2):
        try:
            tiers = split_tiers(tiers_match[1])
        except ValueError as exc:
            raise TicketError(f"STEP 2 tiers=: {exc}") from None
        unknown = [t for t in tiers if seats is not None and t not in seats and t != "local"]
        if unknown:
            known = ", ".join(sorted(seats or ())) or "none"
            raise UnknownSeats(
                f"STEP 2 tiers= names {', '.join(unknown)}, which no [seats.<name>] table "
                f"configures (the seats are {known}); fix the names or add the seats",
                unknown,
            )
    targets: list[str] = []
    if targets_match := _TARGETS.search(step2):
        targets = [t.strip() for t in re.split(r"[,\s]+", targets_match[1]) if t.strip()]
        for target in targets:
            if os.path.isabs(target) or ".." in target.split("/"):
                raise TicketError(
                    f"STEP 2 targets: {target} must be a path relative to the REPO, without '..'"
                )
    _check_step1(sections["STEP 1"], repo, spec, config)
    nicks = _NICK.findall(step2)
    return Ticket(
        sections=sections,
        repo=repo,
        spec=spec,
        spec_relative=relative,
        language=language,
        targets=targets,
        tiers=tiers,
        addressed=nicks[0] if nicks else None,
    )

"""What a repository may say to bullpen's git: the allow-list of config keys, the attributes.

A repository's own `.git/config` and its attributes files are data written by
whoever could write the repository: in a grind's clone, a code seat or the
model-written code under test; in a memory repository, anyone with the
home's rights. Git runs commands those files name (a filter driver's
`clean`, `diff.external`, `core.fsmonitor`, `gpg.program`, a textconv, a
merge driver, `core.sshCommand`, …), so bullpen's git (agents/git/safe.py)
refuses a repository whose config sets any key outside a short allow-list
of data-only keys, or whose attributes name a filter, diff or merge driver.
The allow-list rather than a deny-list: git grows new command keys, and a
key we never heard of is refused, not run.

Pure logic, no I/O: the caller lists the config (git's own parse, so a
quoting trick reads the same here as in git) and reads the files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ALLOWED_KEYS",
    "Planted",
    "attributes_refusal",
    "config_refusal",
    "key_allowed",
]

# `section.variable`, or `section.*.variable` for any subsection; lower case, as git lists them.
ALLOWED_KEYS = frozenset(
    {
        "core.repositoryformatversion",
        "core.filemode",
        "core.bare",
        "core.logallrefupdates",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.symlinks",
        "core.autocrlf",
        "core.eol",
        "core.safecrlf",
        "core.quotepath",
        "extensions.objectformat",
        "extensions.worktreeconfig",
        "init.defaultbranch",
        "user.name",
        "user.email",
        "remote.*.url",
        "remote.*.pushurl",
        "remote.*.fetch",
        "remote.*.push",
        "remote.*.tagopt",
        "remote.*.prune",
        "branch.*.remote",
        "branch.*.merge",
        "branch.*.rebase",
        "branch.*.pushremote",
        "branch.*.description",
        "pull.rebase",
        "pull.ff",
        "push.default",
        "push.autosetupremote",
        "fetch.prune",
    }
)
# Attribute values naming no driver: git's own diff patterns and merge drivers.
BUILTIN_DIFF = frozenset(
    [
        "ada",
        "bash",
        "bibtex",
        "cpp",
        "csharp",
        "css",
        "dts",
        "elixir",
        "fortran",
        "fountain",
        "golang",
        "html",
        "java",
        "kotlin",
        "markdown",
        "matlab",
        "objc",
        "pascal",
        "perl",
        "php",
        "python",
        "ruby",
        "rust",
        "scheme",
        "tex",
    ]
)
BUILTIN_MERGE = frozenset({"text", "binary", "union"})
_DRIVER = re.compile(r"(?:^|\s)(filter|diff|merge)=([^\s\"]+)", re.IGNORECASE)


@dataclass(frozen=True)
class Planted:
    """One thing a repository says that bullpen's git will not run under."""

    key: str  # `filter.x.clean`, or the attribute `filter=x`
    place: str  # the file, relative to the work tree: `.git/config`, `sub/.gitattributes`
    # "config", "attributes", "file" (one git would read that is not checkable), "worktree"
    # (a `.git` written into a work tree whose repository is kept apart), "staged" (a path
    # the work tree offers that a commit may not hold)
    kind: str

    @property
    def what(self) -> str:
        """`git config sets filter.x.clean`, `git attributes name the filter driver x
        (filter=x)`, `git metadata holds <what cannot be checked>`, `work tree holds git
        metadata (<files>), …` or `staged path <path and why>`."""
        if self.kind == "config":
            return f"git config sets {self.key}"
        if self.kind == "file":
            return f"git metadata holds {self.key}"
        if self.kind == "worktree":
            return (
                f"work tree holds git metadata ({self.key}), which bullpen's git never reads: "
                "its own repository is kept where the fenced side cannot write it"
            )
        if self.kind == "staged":
            return f"staged path {self.key}"
        name, _, value = self.key.partition("=")
        return f"git attributes name the {name.lower()} driver {value} ({self.key})"


def _shape(key: str) -> str | None:
    """`section.variable` or `section.*.variable` for a listed key; None if not one."""
    section, dot, rest = key.partition(".")
    if not dot or not rest:
        return None
    middle, _, variable = rest.rpartition(".")
    shape = f"{section}.*.{variable}" if middle else f"{section}.{variable}"
    return shape.lower()


def key_allowed(key: str) -> bool:
    """Is `key` (as `git config --list` names it) one bullpen's git runs under?"""
    shape = _shape(key)
    return shape is not None and shape in ALLOWED_KEYS


def config_refusal(keys: list[str], place: str) -> Planted | None:
    """The first key of a config file (listed in order) outside the allow-list, or None."""
    for key in keys:
        if not key_allowed(key):
            return Planted(key, place, "config")
    return None


def attributes_refusal(text: str, place: str) -> Planted | None:
    """The first attribute of an attributes file naming a filter, diff or merge driver.

    Every token of every line is read, a macro definition (`[attr]x filter=y`) and a
    quoted pattern included: reading too much refuses a harmless line, never runs one."""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for found in _DRIVER.finditer(line):
            kind, value = found.group(1).lower(), found.group(2)
            builtin = BUILTIN_DIFF if kind == "diff" else BUILTIN_MERGE if kind == "merge" else ()
            if value not in builtin:
                return Planted(f"{kind}={value}", place, "attributes")
    return None

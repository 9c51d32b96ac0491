"""`bullpen init --demo`: sample memories, a ledger and traces, so a backpass runs at once.

Lays down, under the home (the default `[backpass]` paths):

    memory/public/    a git repository: memory.md            (one commit on main)
    memory/private/   a git repository: memory.md, ledger.md (one commit on main)
    traces/           transcripts in JSONL and Markdown, some full of `&`, `$1`, `\\1`,
                      `{}` and `{{trace}}`, which literal substitution leaves alone

Plain `git`, with a bullpen identity for the one commit so it works on a
machine with no git identity configured.
"""

from __future__ import annotations

from pathlib import Path

from agents.backpass.gitwork import git
from agents.packaged import defaults
from room.errors import ConfigError
from trust.secretfiles import copy_private_tree

__all__ = ["lay_down_demo"]

TARGETS = {
    "memory/public": "memory/public",
    "memory/private": "memory/private",
    "traces": "traces",
}


def lay_down_demo(home_root: Path) -> None:
    """Copy the demo memories and traces into `home_root` and commit each memory repository."""
    for target in TARGETS.values():
        if (home_root / target).exists():
            raise ConfigError(
                f"{home_root / target} already exists; the demo never overwrites anything. "
                "Remove it or lay the demo down in a new home"
            )
    source = defaults() / "demo"
    for name, target in TARGETS.items():
        copy_private_tree(source / name, home_root / target, ignore=("__pycache__", "__init__.py"))
    for repo in ("memory/public", "memory/private"):
        path = home_root / repo
        git(path, "init", "--quiet", "--initial-branch=main")
        git(path, "add", "--all")
        git(path, "commit", "--quiet", "-m", "demo memory for the backpass", identity=True)

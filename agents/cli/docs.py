"""`bullpen docs [NAME]`: the operator docs, as installed with this bullpen.

Error messages point here (`see bullpen docs gateway`) rather than at a
docs/ path, which exists only in a source checkout: the docs ship inside the
package (agents.docs), so every installation can print them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.packaged import docs_dir
from room.errors import UsageError


def names(folder: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (folder or docs_dir()).glob("*.md"))


def cmd_docs(args: argparse.Namespace) -> int:
    folder = docs_dir()
    known = names(folder)
    if not args.name:
        print("\n".join(known))
        print("print one with: bullpen docs NAME", file=sys.stderr)
        return 0
    name = args.name.removesuffix(".md").removeprefix("docs/")
    if name not in known:
        raise UsageError(f"there is no doc named {args.name!r}; the docs are {', '.join(known)}")
    sys.stdout.write((folder / f"{name}.md").read_text(encoding="utf-8"))
    return 0

"""A hostile writer of git metadata into a grind's work tree: a code seat, or the code under test.

Run as a `kind = "cmd"` code seat (the prompt on stdin, the clone its working directory),
or its `plant` called from a spec's own code during the fenced test run (`runpy.run_path`).
As a seat:

    git_planter.py VARIANT TOP CANARY SECRET MEMORY_GITDIR MEMORY_SHA [PROMPT_LOG]

A seat writes the fix the spec wants (calc.py), so a grinder that commits what was planted
goes GREEN, and plants one VARIANT in TOP (the clone; "fix" plants nothing):

  index       `.git/index`, a v2 index with zeroed stat fields naming CANARY and SECRET
              by paths that climb out of the work tree (`../../outside/canary.txt`)
  gitlink     `sub/.git`, a gitdir file pointing at MEMORY_GITDIR: a nested repository
              git would commit as a gitlink
  alternates  `.git/objects/info/alternates` naming MEMORY_GITDIR's objects, and the
              clone's branch rewritten to MEMORY_SHA
  history     alternates, `.git/refs/replace/<HEAD>` and `.git/info/grafts` putting
              MEMORY_SHA in place of the clone's history
  replace     only `.git/refs/replace/<HEAD>` naming MEMORY_SHA
  apart-index, apart-alternates, apart-replace
              the same, written straight into the grinder's own git directory beside
              the clone (`<clone>.git`), as a program no fence holds could

With PROMPT_LOG it appends the prompt it was given to that file (what a seat was shown).
With PLANTER_WRONG_FIRST set, its first iteration (BULLPEN_ITERATION=1) writes a wrong fix,
so the grind goes on to a second turn, whose prompt shows the first turn's commit.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import zlib
from pathlib import Path

FIX = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
WRONG = "def add(a, b):\n    return 0\n\n\ndef sub(a, b):\n    return 0\n"
EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae5a2a6a3b5e4ac8e4"


def index(paths: list[str]) -> bytes:
    """A v2 index, stat fields zeroed, one regular-file entry per path (as written)."""
    body = b""
    for path in sorted(paths):
        name = path.encode()
        entry = struct.pack(">10I", 0, 0, 0, 0, 0, 0, 0o100644, 0, 0, 0)
        entry += bytes.fromhex(EMPTY_BLOB) + struct.pack(">H", min(len(name), 0xFFF)) + name
        entry += b"\0" * (8 - len(entry) % 8)
        body += entry
    data = b"DIRC" + struct.pack(">II", 2, len(paths)) + body
    return data + hashlib.sha1(data).digest()


def head(dot: Path) -> tuple[str, str]:
    """(the branch ref HEAD names, the sha it holds) of a git dir already there, else guesses."""
    ref, sha = "refs/heads/master", "0" * 40
    try:
        text = (dot / "HEAD").read_text().strip()
        ref = text.removeprefix("ref: ") if text.startswith("ref: ") else ref
        sha = (dot / ref).read_text().strip()
    except OSError:
        pass
    return ref, sha


def write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


def plant(variant: str, top: Path, canary: str, secret: str, gitdir: str, sha: str) -> None:
    dot = top / ".git"
    if variant.startswith("apart-"):
        dot, variant = top.with_name(top.name + ".git"), variant.removeprefix("apart-")
    if variant == "index":
        climb = [os.path.relpath(p, top) for p in (canary, secret)]
        write(dot / "index", index(climb))
        # the blob the entries name, so git reads the index without a complaint
        write(dot / "objects" / EMPTY_BLOB[:2] / EMPTY_BLOB[2:], zlib.compress(b"blob 0\0"))
    elif variant == "gitlink":
        write(top / "sub" / "notes.txt", "a nested project\n")
        write(top / "sub" / ".git", f"gitdir: {gitdir}\n")
    elif variant in ("alternates", "history"):
        ref, current = head(dot)
        write(dot / "objects" / "info" / "alternates", f"{gitdir}/objects\n")
        if variant == "alternates":
            write(dot / ref, sha + "\n")
        else:
            write(dot / "refs" / "replace" / current, sha + "\n")
            write(dot / "info" / "grafts", f"{current} {sha}\n")
    elif variant == "replace":
        write(dot / "refs" / "replace" / head(dot)[1], sha + "\n")
    else:
        raise SystemExit(f"unknown variant {variant}")


def main(argv: list[str]) -> int:
    """As a code seat: log the prompt, write the fix, plant the variant ("fix": none)."""
    variant, top, canary, secret, gitdir, sha = argv[:6]
    prompt = sys.stdin.read()
    if len(argv) > 6:
        with open(argv[6], "a", encoding="utf-8") as log:
            log.write(prompt + "\n---\n")
    where = Path(top).resolve()
    first = os.environ.get("BULLPEN_ITERATION") == "1"
    (where / "calc.py").write_text(
        WRONG if first and os.environ.get("PLANTER_WRONG_FIRST") else FIX
    )
    if variant != "fix":
        plant(variant, where, canary, secret, gitdir, sha)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

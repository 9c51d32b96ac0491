"""`bullpen eval SUITE --rounds N`: the learning loop, measured.

After each round but the last, the round's runs become traces and go through the
society's own loop: each case's thread (its room lines) is written as a JSONL trace
and each step case as a short transcript of what it was asked and how its answer was
judged; `bullpen backpass` reads them into the eval home's memory repositories; the eval
then merges the backpass branch into each repository's default branch (it stands in for
the person who reviews it, in its throwaway home only) and runs `bullpen memory sync`,
which indexes the merged bullets as lessons. The next round wakes every step with them,
so whether lessons help a seat is the difference between rounds on the scoreboard.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from agents.evaluate.runners import CASE_TIMEOUT_S
from room.client import read_file
from room.log import Filter

if TYPE_CHECKING:
    from agents.evaluate.runners import CaseResult
    from agents.evaluate.society import EvalSociety

MAX_ROUNDS = 5
MEMORY_FILE = "memory.md"
SEED = {
    "public": "# Public memory\n\nLessons that are safe to share: tools, code and process.\n",
    "private": "# Private memory\n\nLessons about this operator's own work.\n",
}
# What a backpass needs beside the suite's own nicks, and the librarian that indexes lessons.
LEARNING_NICKS = [
    "foreman",
    "librarian",
    "tracelister",
    "analyst",
    "quotechecker",
    "ledgerkeeper",
    "synthesizer",
]


def memory_repos(society: EvalSociety) -> None:
    """The eval home's memory repositories ([backpass] public and private), made when absent:
    a git repository with a memory.md, committed on main."""
    from agents.backpass.config import BackpassConfig
    from agents.backpass.gitwork import git

    config = BackpassConfig.from_home(society.home)
    for name, path in (("public", config.public), ("private", config.private)):
        repo = society.home.path(path)
        if (repo / ".git").exists():
            continue
        repo.mkdir(parents=True, exist_ok=True)
        (repo / config.memory_file).write_text(SEED[name], encoding="utf-8")
        git(repo, "init", "--quiet", "--initial-branch=main")
        git(repo, "add", "--all")
        git(repo, "commit", "--quiet", "-m", "eval memory", identity=True)


def _transcript(result: CaseResult) -> str:
    """A step case as a session a backpass can read: what was asked and how it was judged,
    in sentences its analysis can quote."""
    lines = [f"# Step case {result.case}: the {result.step} step", ""]
    if result.passed:
        lines.append(f"- The {result.step} step's answer passed every validator of its case.")
    else:
        failed = ", ".join(result.failed_gates)
        lines.append(f"- The {result.step} step's answer failed these validators: {failed}.")
        if result.note:
            lines.append(f"- Why it failed: {result.note}")
    return "\n".join(lines) + "\n"


def write_traces(society: EvalSociety, number: int, results: list[CaseResult]) -> Path:
    """The round's traces: each case's thread as JSONL, each step case as a transcript."""
    folder = society.root / "traces" / f"eval-round-{number}"
    folder.mkdir(parents=True, exist_ok=True)
    for result in results:
        if result.thread:
            lines, _ = read_file(society.home.room_path, 0, None, Filter(thread=result.thread))
            text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
            (folder / f"{result.case}.jsonl").write_text(text, encoding="utf-8")
        elif result.step and result.skipped is None:
            (folder / f"{result.case}.md").write_text(_transcript(result), encoding="utf-8")
    return folder


def merge_backpass(society: EvalSociety) -> list[str]:
    """Each memory repository's newest backpass branch, merged into its default branch."""
    from agents.backpass.config import BackpassConfig
    from agents.backpass.gitwork import git, inspect_repo

    config = BackpassConfig.from_home(society.home)
    merged = []
    for path in (config.public, config.private):
        repo = society.home.path(path)
        info = inspect_repo(repo, config.branch_prefix)
        if info.base != info.default:
            git(repo, "merge", "--quiet", "--ff-only", info.base)
            merged.append(f"{repo.name}: {info.base}")
    return merged


def learn(society: EvalSociety, number: int, results: list[CaseResult], seat: str) -> str:
    """Round `number`'s traces through the backpass, merged and indexed: what it said."""
    traces = write_traces(society, number, results)
    say = f"eval: seat {seat}: round {number}: a backpass over its {len(results)} traces"
    print(say, file=sys.stderr, flush=True)
    done = society.run("backpass", "--traces", str(traces), timeout=CASE_TIMEOUT_S)
    said = [] if done.returncode == 0 else [f"backpass exit {done.returncode} (a trace failed)"]
    merged = merge_backpass(society)  # what it committed is kept even when a trace failed
    said.append("merged " + (", ".join(merged) or "nothing (no bullet proposed)"))
    synced = society.run("memory", "sync", timeout=CASE_TIMEOUT_S)
    if synced.returncode != 0:
        said.append(f"memory sync exit {synced.returncode}: " + synced.stderr.strip()[-300:])
    return "; ".join(said)

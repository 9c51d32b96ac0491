"""`bullpen memory sync`: the backpass's merged memory read back into shared memory.

Each memory repository's `memory.md` on its default branch (what a person
merged, never an unreviewed backpass branch) is indexed as lessons: the
public repository's bullets into `/bullpen/lessons-learned`, the private
one's into `/bullpen/lessons-learned/<nick>` when `[backpass] private_nick`
binds it to a nick (else the private bullets stay private). Each entry names
its bullet id (`PUB-003`), the commit, and the sha256 of every trace whose
session a ledger line it covers cites. Saves go through the room like any
other; a bullet whose text is gone from the file is retracted (or
superseded by the bullet that now holds its id), never left behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.backpass.config import BackpassConfig
from agents.backpass.gitwork import GitError, git, inspect_repo, show_file
from agents.backpass.ledger import Entry as LedgerEntry
from agents.backpass.ledger import parse as parse_ledger
from agents.backpass.memory import Bullet, bullets, covers, tokens
from agents.backpass.traces import read_state
from agents.librarian.client import WAIT_S, ask_librarian
from agents.memory.entry import Entry
from agents.memory.index import Index
from agents.memory.namespaces import GENERAL_LESSONS, index_path, lessons_ns

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["sync"]


@dataclass(frozen=True)
class Target:
    """One repository and where its bullets go."""

    repo: Path
    prefix: str
    ns: str

    @property
    def key(self) -> str:
        return f"backpass:{self.repo}"


def targets(config: BackpassConfig, home: Home) -> list[Target]:
    found = [Target(home.path(config.public).resolve(), "PUB", GENERAL_LESSONS)]
    if config.private_nick:
        found.append(
            Target(home.path(config.private).resolve(), "PRV", lessons_ns(config.private_nick))
        )
    return found


def _traces_of(
    bullet: Bullet, ledger: list[LedgerEntry], shas: dict[str, str], threshold: float
) -> list[str]:
    """The sha256 of each trace whose session a ledger line this bullet covers cites."""
    words = tokens(bullet.text)
    found: dict[str, None] = {}
    for line in ledger:
        if covers(words, tokens(line.text), threshold):
            for session in line.sessions:
                if session in shas:
                    found.setdefault(shas[session], None)
    return list(found)


def _sessions_to_sha(config: BackpassConfig, home: Home) -> dict[str, str]:
    """session (the trace's path under the traces folder) -> its analysed sha256."""
    traces = home.path(config.traces).resolve()
    out: dict[str, str] = {}
    for path, sha in read_state(home.path(config.state).resolve()).items():
        try:
            out[str(Path(path).resolve().relative_to(traces))] = sha
        except ValueError:
            continue
    return out


def _ledger(config: BackpassConfig, home: Home) -> list[LedgerEntry]:
    private = home.path(config.private).resolve()
    try:
        info = inspect_repo(private, config.branch_prefix)
        text = show_file(private, f"refs/heads/{info.default}", config.ledger) or ""
    except GitError:
        return []
    return [part for part in parse_ledger(text) if isinstance(part, LedgerEntry)]


def plan(
    target: Target,
    commit: str,
    found: list[Bullet],
    live: list[Entry],
    traces: dict[str, list[str]],
) -> list[dict[str, Any]]:
    """The saves that make the index hold exactly `found` for this repository."""
    by_text = {entry.text: entry for entry in live}
    current = {" ".join(b.text.split()) for b in found}
    gone = [entry for entry in live if entry.text not in current]
    gone_by_bullet = {(entry.source or "").split()[-1]: entry for entry in gone}
    saves: list[dict[str, Any]] = []
    replaced: set[int] = set()
    for bullet in found:
        text = " ".join(bullet.text.split())
        if text in by_text:
            continue
        save: dict[str, Any] = {
            "ns": target.ns,
            "text": text,
            "source": f"backpass {target.repo.name}@{commit[:12]} {bullet.id}",
            "key": target.key,
            "traces": traces.get(bullet.id, []),
            "tags": ["backpass", bullet.id],
        }
        old = gone_by_bullet.get(bullet.id)
        if old is not None and old.seq not in replaced:
            save["supersedes"] = old.id
            replaced.add(old.seq)
        saves.append(save)
    for entry in gone:
        if entry.seq not in replaced:
            saves.append(
                {
                    "ns": entry.ns,
                    "text": f"removed from memory.md at {commit[:12]}: {entry.text}"[:4000],
                    "source": f"backpass {target.repo.name}@{commit[:12]}",
                    "key": target.key,
                    "supersedes": entry.id,
                    "retract": True,
                }
            )
    return saves


async def sync(home: Home, wait_s: float = WAIT_S) -> list[str]:
    """Bring the index in line with each repository's merged memory.md; one line per repository.
    It posts as the operator: the one nick besides its owner that a lessons namespace takes
    saves from (agents/memory/namespaces.py keepers)."""
    config = BackpassConfig.from_home(home)
    shas = _sessions_to_sha(config, home)
    ledger = _ledger(config, home)
    report: list[str] = []
    async with home.client(home.society.operator) as client:
        for target in targets(config, home):
            info = inspect_repo(target.repo, config.branch_prefix)
            commit = _head(target.repo, info.default)
            text = show_file(target.repo, commit, config.memory_file) or ""
            found = bullets(text, target.prefix)
            traces = {b.id: _traces_of(b, ledger, shas, config.cover_threshold) for b in found}
            index = Index.open(index_path(home), create=False)
            try:
                live = index.live_with_key(target.key)
            finally:
                index.close()
            saves = plan(target, commit, found, live, traces)
            for save in saves:
                await ask_librarian(
                    home, client, f"remember: {save['text'][:80]}", {"save": save}, wait_s=wait_s
                )
            added = sum(1 for s in saves if not s.get("retract"))
            retracted = len(saves) - added
            report.append(
                f"{target.repo.name} @ {commit[:12]} -> {target.ns}: {len(found)} bullets, "
                f"{added} saved, {retracted} retracted"
            )
    return report


def _head(repo: Path, branch: str) -> str:
    """The default branch's commit: what was merged, not the newest unmerged backpass branch."""
    return git(repo, "rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}")[1].decode().strip()

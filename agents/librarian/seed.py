"""The entries a new home starts with: `bullpen init` lays them down, the librarian saves them.

Shared memory is a projection of the room, so a home's first entries are
saves like any other: `bullpen init` writes the campaign-sandbox rules
(config/sandbox-rules.toml, seed 002 §8) into `memory-seed/` of the home,
with the home's build root and alias filled in, and the librarian, once it
has caught up, posts each rule whose key has no live entry as a save to
itself under `/bullpen/sandbox`. When every key is live the file is renamed
`*.saved`: from then on the room holds them, and an entry the operator later
retracts or supersedes is never posted again.
"""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.memory.entry import parse_save
from agents.packaged import defaults
from agents.runtime.outcome import OutPost
from room.errors import ConfigError

if TYPE_CHECKING:
    from agents.memory.index import Index

__all__ = ["SANDBOX_NS", "SEED_FOLDER", "Seeder", "lay_down", "seed_saves"]

SEED_FOLDER = "memory-seed"
SANDBOX_NS = "/bullpen/sandbox"
RULES = "sandbox-rules.toml"
SOURCE = "seed 002 §8, the campaign-sandbox convention (bullpen init)"
RETRY_S = 60.0  # posts not yet indexed by then are posted again


def seed_saves(text: str, root: str, alias: str) -> list[dict[str, Any]]:
    """The saves of a rules file, placeholders filled, each checked as the librarian will."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{RULES}: {exc}") from None
    saves = []
    for entry in table.get("entry", []):
        body = str(entry.get("text", "")).replace("@ROOT@", root).replace("@ALIAS@", alias)
        save = {"ns": SANDBOX_NS, "text": body, "tags": list(entry.get("tags", [])),
                "key": str(entry["key"]), "source": SOURCE}  # fmt: skip
        parse_save(save)  # a broken rules file fails at init, not in the room
        saves.append(save)
    return saves


def lay_down(home: Path, root: str, alias: str) -> Path:
    """Write the home's pending seed: the sandbox rules as saves (JSON lines in TOML)."""
    saves = seed_saves((defaults() / RULES).read_text(encoding="utf-8"), root, alias)
    folder = home / SEED_FOLDER
    folder.mkdir(mode=0o700, exist_ok=True)
    target = folder / RULES
    lines = ["# Saved to /bullpen/sandbox by the librarian's first start, then renamed *.saved", ""]
    for save in saves:
        lines += ["[[entry]]", f"key = {_toml(save['key'])}", f"tags = {_toml(save['tags'])}",
                  f"text = {_toml(save['text'])}", ""]  # fmt: skip
    target.write_text("\n".join(lines), encoding="utf-8")
    return target


def _toml(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string or list is valid TOML


class Seeder:
    """The librarian's side: post what is pending, once indexed mark the seed saved."""

    def __init__(self, home_root: Path, nick: str) -> None:
        self.file = home_root / SEED_FOLDER / RULES
        self.nick = nick
        self.posted_at: float | None = None

    def posts(self, index: Index) -> list[OutPost]:
        if not self.file.is_file():
            return []
        saves = seed_saves(self.file.read_text(encoding="utf-8"), "", "")
        missing = [s for s in saves if not index.live_with_key(s["key"])]
        if not missing:
            self.file.rename(self.file.with_name(self.file.name + ".saved"))
            return []
        now = time.monotonic()
        if self.posted_at is not None and now - self.posted_at < RETRY_S:
            return []  # in flight: the projection has not caught up with them yet
        self.posted_at = now
        return [
            OutPost(
                to=f"@{self.nick}",
                body=f"remember ({SANDBOX_NS}): {s['text'][:60]}",
                type="ask",
                data={"save": s},
                thread="memory-seed",
            )
            for s in missing
        ]

"""Every place that holds a secret or private data, wherever trust.toml and society.toml put it.

The fences around model-written code and code seats (agents/build/fence.py) hide
these places; the roots (agents/roots.py) refuse a folder that holds a secret.
The fence once hid only the home's root, so a `secret_file` configured outside
the home was read by the code under test, written into its clone and read back
by the seat. So the places are not guessed from the home's layout: each
configuration key that names one is listed here, once, with how to find it.

    SECRET_KEYS    credentials: the shared secret, the tokens, the keys
    PRIVATE_KEYS   private data: the room, the memory repositories and index, the traces,
                   the backpass's state and runs, the gateway's ledger and recordings,
                   the web view's sessions
    VISIBLE_KEYS   every other key that names a path, and why it may stay visible

tests/build/test_hidden.py walks every configuration model for keys that name a
path and fails on one that none of the three tables lists, so a new secret path
cannot be forgotten.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agents.roots import SECRET_KEYS, PlaceKey, gather_places, secret_places

if TYPE_CHECKING:
    from agents.home import Home

__all__ = [
    "PRIVATE_KEYS",
    "SECRET_KEYS",
    "VISIBLE_KEYS",
    "PlaceKey",
    "fence_hidden",
    "private_places",
    "secret_places",
]


def _backpass(key: str) -> Callable[[Home], list[Path]]:
    def paths(home: Home) -> list[Path]:
        from agents.backpass.config import BackpassConfig

        return [home.path(str(getattr(BackpassConfig.from_home(home), key)))]

    return paths


def _root(purpose: str) -> Callable[[Home], list[Path]]:
    def paths(home: Home) -> list[Path]:
        return [home.path(value) for value in home.society.roots.declared(purpose) or []]

    return paths


def _ledger(home: Home) -> list[Path]:
    from agents.gateway.config import GatewayConfig

    return [GatewayConfig.of(home).ledger_path(home)]


def _recordings(home: Home) -> list[Path]:
    from agents.gateway.recording import recording_path

    return [recording_path(home)]


def _sessions(home: Home) -> list[Path]:
    from agents.web.sessions import store_file

    return [store_file(home.root)]


def _index(home: Home) -> list[Path]:
    from agents.memory.namespaces import index_path

    return [index_path(home)]


def _room(home: Home) -> list[Path]:
    """The room's file and every file beside it named after it (.durable, .checkpoint, …)."""
    room = home.room_path
    beside = room.parent.glob(f"{room.name}.*") if room.parent.is_dir() else []
    return [room, *beside]


def _build_hidden(home: Home) -> list[Path]:
    """`[build] hidden`: more places the operator (or `bullpen eval`) has every fence hide."""
    value = home.society.build.get("hidden") or []
    return [home.path(str(place)) for place in (value if isinstance(value, list) else [value])]


PRIVATE_KEYS: tuple[PlaceKey, ...] = (
    PlaceKey("[room] path", "the room and its side files (every memory save is a post)", _room),
    PlaceKey("[backpass] public", "the public memory repository", _backpass("public")),
    PlaceKey("[backpass] private", "the private memory repository", _backpass("private")),
    PlaceKey("[backpass] traces", "the session transcripts", _backpass("traces")),
    PlaceKey("[backpass] state", "which traces were read", _backpass("state")),
    PlaceKey("[backpass] runs", "the backpass's worktrees of the memory", _backpass("runs")),
    PlaceKey("[roots] memory", "the memory repositories", _root("memory")),
    PlaceKey("[roots] traces", "the session transcripts", _root("traces")),
    PlaceKey("[roots] runs", "per-run artifacts and worktrees", _root("runs")),
    PlaceKey("[roots] state", "the backpass state", _root("state")),
    PlaceKey("[memory] index", "the librarian's index of every save", _index),
    PlaceKey("[gateway] ledger", "one line per model call", _ledger),
    PlaceKey("the gateway's recordings", "recorded answers (state/gateway/)", _recordings),
    PlaceKey("the web view's sessions", "live sessions (state/web-sessions.sqlite)", _sessions),
    PlaceKey("[build] hidden", "what the operator has every fence hide", _build_hidden),
)

# Every other key that names a path, and why the fences may leave it visible.
VISIBLE_KEYS: dict[str, str] = {
    "[backpass] memory_file": "a file inside each memory repository, hidden with it",
    "[backpass] ledger": "a file inside the private memory repository, hidden with it",
    "[backpass] analysis_prompt": "a prompt template the operator wrote: no private data",
    "[backpass] synthesis_prompt": "a prompt template the operator wrote: no private data",
    "[expedition] kb": "the knowledge base a run reads: material, not a secret",
    "[expedition] briefs": "the briefs an expedition writes from the knowledge base",
    "[roots] kb": "knowledge bases: material, not a secret",
    "[roots] blaze": "blaze files: material, not a secret",
    "[roots] briefs": "the briefs an expedition writes",
    "[roots] prompts": "prompt templates",
    "[roots] build": "the build dirs: the grind's own clone is the fenced side's work",
    "[build] root": "the build dirs: read-only to a seat but its clone",
    "[build] alias": "a link to the campaign's build dir",
    "[build] node_path": "node's shared modules, which the code under test needs",
    "[seats.NAME] writable": "a cmd seat's own state folders, which it must write",
}


def private_places(home: Home) -> list[Path]:
    """Every place holding a secret or private data, resolved, existing or not (a fence
    hides those that exist). ConfigError when a section that names one does not parse: a
    fence built on a guess would hide too little."""
    configured = home.society_file.exists() and home.trust_file.exists()  # else a bare folder
    return gather_places(home, (*SECRET_KEYS, *PRIVATE_KEYS), strict=configured)


def fence_hidden(home: Home) -> tuple[Path, ...]:
    """What a fence around model-written code hides: every home this process acts for,
    whole, and every private place wherever it lies."""
    return tuple(dict.fromkeys((*home.homes(), *private_places(home))))

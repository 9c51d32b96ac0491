"""The house stays as docs/how-it-works.md draws it: imports run one way, modules stay small,
and every handler string an earlier `bullpen init` wrote keeps resolving."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agents import config as society
from agents.runtime.handlers import PythonStep

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("room", "trust", "agents")
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every project module `name` imports, anywhere in the file: at the top, inside a
    function, or under TYPE_CHECKING (a circle hidden there is still a circle)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        # `from agents import config`: the module counts, not the (empty) top package
        found.update(t for t in targets if t in known and t != name and t not in PACKAGES)
    return found


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def _circle_from(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path start -> ... -> start, if there is one (depth-first, iterative)."""
    stack = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph[node]):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_the_circle_finder_finds_a_circle() -> None:
    """The check below can fail: a two-module loop is reported as such."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circle_from("a", graph) == ["a", "b", "c", "a"]
    assert _circle_from("d", graph) is None


def test_no_import_circles() -> None:
    """No module of room, trust or agents reaches itself through its imports."""
    graph = _graph()
    assert len(graph) > 100  # the walk saw the whole house
    circles = [c for name in sorted(graph) if (c := _circle_from(name, graph))]
    assert circles == [], "import circles:\n" + "\n".join(" -> ".join(c) for c in circles[:5])


# What every layer above the home may import: the room, trust, seats, config and the home.
_HOME = ("room", "trust", "agents.seats", "agents.config", "agents.home")

LAYERS: dict[str, tuple[str, ...]] = {
    # a folder: the folders it may import (besides itself)
    "room": ("trust",),
    "trust": ("room",),
    "agents.seats": ("room", "trust"),
    "agents.config": ("room", "trust", "agents.seats"),
    # the home's format record (home.toml), read at every start: below the home
    "agents.formats": ("room",),
    "agents.home": ("room", "trust", "agents.seats", "agents.config", "agents.formats"),
    # shared memory's index and recall: low enough that every lurker can read its lessons
    "agents.memory": _HOME,
    "agents.runtime": (
        *_HOME,
        "agents.memory",
        "agents.wording",  # counted words; it imports nothing
    ),
    # the model gateway: its own subsystem; nothing below it knows it (a seat is handed its way in)
    # the gateway reads seat tables (EnvVarName); seats never import the gateway
    # ... and, when [telemetry] is configured, exports each call's span (agents.telemetry)
    "agents.gateway": (*_HOME, "agents.telemetry"),
    # traces of runs: built from the room (the web view's run reader, the foreman's keys,
    # replay's thread reader) and the gateway's ledger
    "agents.telemetry": (
        *_HOME,
        "agents.web",
        "agents.foreman",
        "agents.replay",
        "agents.gateway",
    ),
    "agents.foreman": (
        *_HOME,
        "agents.runtime",
    ),
    # objects by SHA-256 through the room's engine (the hub's or NATS's store): below the
    # pipelines that hand build dirs and artifacts across hosts
    "agents.objects": _HOME,
    # bullpen's one git (build, backpass, librarian), the allow-list it checks repositories
    # against, and the grinder's work tree with its git directory kept apart: below every
    # pipeline, above only the room's errors
    "agents.git": ("room",),
    # the one safe copy and the one bounded read of what someone handed bullpen (suites,
    # replays, tickets, bundles): below every pipeline and command that takes files in
    "agents.intake": ("room", "agents.roots", "agents.config"),
    # the build pipeline: plugs into the foreman through the registry; it runs git through
    # agents/git/safe.py and reads where [backpass] puts the memory repositories (a guarded
    # code seat may not write them) from the backpass's own config
    "agents.build": (
        *_HOME,
        "agents.runtime",
        "agents.foreman",
        "agents.roots",
        "agents.privateplaces",  # every secret and private place: what its fences hide
        "agents.intake",
        "agents.wording",
        "agents.git",
        "agents.backpass.config",
        "agents.memory",  # the lessons a grinder is handed reach its code seat's prompt
        "agents.objects",  # the build dir and the green clone, handed across hosts
    ),
    # the web view reads what the pipelines post and answers the gate through the
    # expedition's own functions; it shows each nick's lessons from shared memory
    "agents.web": (
        *_HOME,
        "agents.runtime",
        "agents.foreman",
        "agents.expedition",
        "agents.backpass",
        "agents.build",
        "agents.gateway",
        "agents.memory",
    ),
    # @librarian, `bullpen memory` and the backpass sync: the top of the house, beside the
    # pipelines; nothing below imports it (agents.memory is what the runtime reads)
    "agents.librarian": (
        *_HOME,
        "agents.roots",
        "agents.memory",
        "agents.runtime",
        "agents.backpass",
        "agents.packaged",  # the campaign-sandbox rules `bullpen init` ships, seeded once
    ),
}


def _layer(name: str) -> str | None:
    for layer in sorted(LAYERS, key=len, reverse=True):
        if name == layer or name.startswith(layer + "."):
            return layer
    return None


def test_lower_folders_never_import_higher_ones() -> None:
    """room and trust import no agent; seats, config, home, runtime and the foreman import no
    pipeline and no command: a pipeline plugs in through the registry, never by name."""
    wrong = []
    for name, imported in _graph().items():
        layer = _layer(name)
        if layer is None:
            continue
        allowed = (layer, *LAYERS[layer])
        for target in imported:
            if not any(target == a or target.startswith(a + ".") for a in allowed):
                wrong.append(f"{name} imports {target}")
    assert wrong == []


def test_the_agents_package_keeps_few_loose_modules() -> None:
    """agents/ holds packages, one per concept, and at most 8 modules loose at its top."""
    loose = sorted(p.name for p in (REPO / "agents").glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 8, loose


def test_modules_stay_small_and_say_why_they_exist() -> None:
    """Every module is under 500 lines and opens with a docstring."""
    too_big, silent = [], []
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_LINES:
            too_big.append(f"{path.relative_to(REPO)} ({len(text.splitlines())} lines)")
        if text.strip() and ast.get_docstring(ast.parse(text)) is None:
            silent.append(name)
    assert too_big == []
    assert silent == []


OLD_SOCIETY = Path(__file__).parent / "fixtures" / "society-0.1.toml"


def _old_handlers() -> list[str]:
    config = society.load(OLD_SOCIETY)
    return sorted({nick.handler for nick in config.nicks.values() if nick.handler})


def test_an_old_society_toml_still_loads() -> None:
    """The society.toml of an earlier `bullpen init` is still a valid configuration."""
    config = society.load(OLD_SOCIETY)
    assert config.nicks["foreman"].wake_replies
    assert len(_old_handlers()) == 14


@pytest.mark.parametrize("target", _old_handlers())
def test_every_old_handler_string_resolves(target: str) -> None:
    """Each handler string an earlier home names loads a callable step."""
    step = PythonStep(target)
    assert callable(step.func)

"""Secrets and private data kept outside the home never reach a fenced run: real builds.

trust.toml may name its secret files anywhere, and society.toml its memory
repositories, index and gateway ledger. The fence once hid only the home's root,
so the spec's own code (model-written, run fenced) read the shared secret kept
outside the home, wrote it into the clone, and the seat was shown it. Here the
shared secret, the read token, the private memory repository, the memory index
and the gateway ledger all lie outside the home; the code under test and a `cmd`
code seat each try to read every one of them (and a file outside the home that
holds nothing private, which they must see: the reads work), writing what they
read into the clone and their output. Nothing private reaches the clone, the
build dir, a prompt or the room.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agents.build.codeseat import take_turn
from agents.build.config import BuildConfig
from agents.build.fence import BWRAP, choose
from agents.build.runs import Workspace
from agents.privateplaces import PRIVATE_KEYS, SECRET_KEYS, VISIBLE_KEYS, fence_hidden
from tests.build.helpers import PY_FIX, set_build, ticket
from tests.support import Society, set_seat, wait_for

FENCE = choose("auto")
NICKS = ("foreman", "sandbox", "testdesigner", "py")
VISIBLE = "VISIBLE-CANARY-nothing-private"
pytestmark = pytest.mark.timeout(400)

# Read every path listed (a hidden file reads blank, a hidden folder is empty), record it.
READ_ALL = """\
import json, os, pathlib
def _read_all(paths, out):
    seen = {{}}
    for path in paths:
        p = pathlib.Path(path)
        try:
            if p.is_dir():
                seen[path] = "; ".join(
                    f.name + "=" + f.read_text(errors="replace")
                    for f in sorted(p.rglob("*")) if f.is_file() and ".git" not in f.parts)
            else:
                seen[path] = p.read_text(errors="replace")
        except OSError as exc:
            seen[path] = "refused: " + (exc.strerror or str(exc))
    out.write_text(json.dumps(seen))
    print("READ", json.dumps(seen))
"""
READ_NOW = READ_ALL + "_read_all({paths!r}, pathlib.Path({out}))\n"
# The spec reads inside its tests: pytest shows a failing test's output, the seat's next input.
SPEC = (
    READ_ALL + "\n\ndef test_add():\n"
    "    _read_all({paths!r}, pathlib.Path(__file__).with_name('spec-read.json'))\n"
    "    import calc\n"
    "    assert calc.add(2, 3) == 5\n\n\n"
    "def test_sub():\n"
    "    import calc\n"
    "    assert calc.sub(2, 3) == -1\n"
)


def _move(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(source, target)
    os.chmod(target, 0o600)


def _set_trust(root: Path, key: str, value: Path) -> None:
    path = root / "trust.toml"
    text, count = re.subn(rf'^{key} = "[^"]*"', f'{key} = "{value}"', path.read_text(), flags=re.M)
    assert count == 1, key
    path.write_text(text)


def _set_section(root: Path, section: str, key: str, value: str) -> None:
    """`key = value` in [section] of society.toml, replacing the key there if it is set."""
    path = root / "society.toml"
    lines = path.read_text().splitlines()
    if f"[{section}]" not in lines:
        lines += ["", f"[{section}]"]
    at = lines.index(f"[{section}]")
    end = next((i for i in range(at + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    body = [line for line in lines[at + 1 : end] if not line.startswith(f"{key} =")]
    path.write_text("\n".join([*lines[: at + 1], f'{key} = "{value}"', *body, *lines[end:]]) + "\n")


@dataclass
class Outside:
    """A home whose secrets and private data lie outside it, and what each holds."""

    society: Society
    base: Path
    held: dict[Path, str]  # every private place outside the home -> a text it holds
    visible: Path  # outside the home and private to no one: the reads must see it

    def paths(self) -> list[str]:
        return [str(p) for p in (*self.held, self.visible)]

    def leaks(self, text: str) -> list[str]:
        return [held for held in self.held.values() if held in text]


def outside_home(base: Path) -> Outside:
    society = Society(base / "home")
    root, out = society.root, base / "elsewhere"
    secret, token = out / "keys" / "post-secret", out / "keys" / "read-token"
    _move(root / "secrets" / "post-secret", secret)
    _set_trust(root, "secret_file", secret)
    society.home.read_token()  # made now, then moved out with the rest
    _move(root / "secrets" / "read-token", token)
    _set_trust(root, "read_token_file", token)
    memory = out / "memory-private"
    memory.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(memory)], check=True)
    (memory / "memory.md").write_text(f"- PRIVATE-MEMORY-{secrets.token_hex(8)}\n")
    _set_section(root, "backpass", "private", str(memory))
    ledger, index = out / "gateway" / "ledger.jsonl", out / "index" / "memory.sqlite"
    for place, text in ((ledger, "LEDGER"), (index, "INDEX")):
        place.parent.mkdir(parents=True)
        place.write_text(f"{text}-{secrets.token_hex(8)}\n")
    _set_section(root, "gateway", "ledger", str(ledger))
    _set_section(root, "memory", "index", str(index))
    visible = out / "public-notes.txt"
    visible.write_text(VISIBLE)
    held = {secret: secret.read_text().strip(), token: token.read_text().strip()}
    held |= {memory: memory.joinpath("memory.md").read_text().strip()}
    held |= {place: place.read_text().strip() for place in (ledger, index)}
    assert all(len(text) >= 16 for text in held.values())
    return Outside(society, base, held, visible)


def test_every_private_place_outside_the_home_is_hidden(tmp_path: Path) -> None:
    """The fence's list names each of them, wherever trust.toml and society.toml put it."""
    outside = outside_home(tmp_path)
    hidden = fence_hidden(outside.society.home)
    assert all(place.resolve() in hidden for place in outside.held), hidden
    assert outside.visible.resolve() not in hidden


@pytest.mark.parametrize("seat_fence", ["guarded", "strict"])
def test_a_code_seat_reads_none_of_them(tmp_path: Path, seat_fence: str) -> None:
    """A cmd seat's program reads each place: under either seat fence every one is blank or
    gone, while the harmless file beside them reads as it is."""
    outside = outside_home(tmp_path)
    root = outside.society.root
    builds = tmp_path / "builds"
    builds.mkdir()
    script = tmp_path / "reader.py"
    script.write_text(READ_NOW.format(paths=outside.paths(), out="'seat-read.json'"))
    set_seat(root, "reader", f'kind = "cmd"\ncommand = ["{sys.executable}", "{script}"]')
    clone, cache = builds / "grind-reader", builds / "grind-reader.cache"
    clone.mkdir()
    cache.mkdir()
    space = Workspace(clone, cache, FENCE, fence_hidden(outside.society.home))
    config = BuildConfig(root=str(builds), alias=str(tmp_path / "alias"), seat_fence=seat_fence)
    extra = {"BULLPEN_SPEC": "test_x.py", "BULLPEN_TIER": "reader", "BULLPEN_ITERATION": "1"}
    home = outside.society.home
    turn = asyncio.run(take_turn(home, "py", "reader", space, "step: code\n", extra, config))
    assert turn.ok, turn.problem
    seen = json.loads((clone / "seat-read.json").read_text())
    assert seen[str(outside.visible)] == VISIBLE  # the reads work
    if FENCE != BWRAP:
        return  # no sandbox here: the seat runs unfenced and says so (tests/build/test_seatfence)
    assert outside.leaks(json.dumps(seen)) == [], seen


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outside]:
    outside = outside_home(tmp_path_factory.mktemp("hidden"))
    society, base = outside.society, outside.base
    (base / "builds").mkdir()
    set_build(society.root, root=str(base / "builds"), alias=str(base / "alias"),
              max_iterations=2, run_timeout_s=60)  # fmt: skip
    seat = base / "seat.py"  # reads every place, keeps its prompt, then writes the fix
    seat.write_text(
        "import pathlib, sys\n"
        "pathlib.Path('prompt.txt').write_text(sys.stdin.read())\n"
        + READ_NOW.format(paths=outside.paths(), out="'seat-read.json'")
        + f"pathlib.Path('calc.py').write_text({PY_FIX!r})\n"
    )
    set_seat(society.root, "reader", f'kind = "cmd"\ncommand = ["{sys.executable}", "{seat}"]')
    society.start_hub()
    procs = [society.spawn(f"lurk-{nick}", "lurk", nick) for nick in NICKS]
    wait_for(lambda: all("lurking" in p.output() or not p.alive() for p in procs), 90, "lurkers")
    assert all(p.alive() for p in procs), "\n".join(p.output() for p in procs)
    try:
        yield outside
    finally:
        society.stop_all()


def _run(outside: Outside, text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    thread = f"hidden-{secrets.token_hex(4)}"
    home = outside.society.home

    async def say() -> None:
        async with home.client(home.society.operator) as client:
            data = {"pipeline": "build", "ticket": text}
            await client.say("@foreman", "build", type="ask", data=data, thread=thread)

    asyncio.run(say())

    def final() -> dict[str, Any] | None:
        lines = [m for m in outside.society.lines() if m.get("thread") == thread]
        done = [m for m in lines if m["from"] == "foreman" and (m.get("data") or {}).get("final")]
        return {"final": done[0], "lines": lines} if done else None

    found = wait_for(final, 240, "the build's final report")
    return found["final"], found["lines"]


def test_the_code_under_test_and_the_seat_read_none_of_them_in_a_real_build(
    bench: Outside,
) -> None:
    """A whole build: the spec's code reads every place when the fenced run imports it, the
    seat reads them at its turn; the build goes green, and no private text is in the clone,
    the build dir, the prompt the seat was given, or the room."""
    folder = bench.base / "builds" / "reads"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_calc.py").write_text(SPEC.format(paths=bench.paths()))
    text = ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="reader", targets="calc.py")
    final, lines = _run(bench, text)
    data = final["data"]
    assert data["green"] is True, final["body"]
    clone = Path(data["clone"])
    prompt = (clone / "prompt.txt").read_text()
    assert "READ " in prompt  # the seat was shown the spec's failing output, reads and all
    for where in (clone / "tests" / "spec-read.json", clone / "seat-read.json"):
        assert json.loads(where.read_text())[str(bench.visible)] == VISIBLE  # the reads work
    room = "\n".join(json.dumps(m) for m in lines)
    if FENCE != BWRAP:
        return  # rlimits hides nothing: docs/build.md says so, and the report names the fence
    files = [p for base in (clone, folder) for p in base.rglob("*") if p.is_file()]
    assert [p for p in files if bench.leaks(p.read_text(errors="replace"))] == []
    assert bench.leaks(prompt) == [] and bench.leaks(room) == []


# --- every configuration key that names a path is listed, and each private one is hidden ---

WORDS = ("file", "folder", "repositor", "path", "director", "index", "ledger", "transcript",
         "worktree", "where", "place")  # fmt: skip


def _is_text(annotation: Any) -> bool:
    if annotation is str:
        return True
    return any(_is_text(arg) for arg in typing.get_args(annotation))


def _names_a_path(name: str, field: Any) -> bool:
    """A key whose value is a path: by its default, its description, or its name."""
    default = field.default if isinstance(field.default, str) else ""
    text = (field.description or "").lower()
    return (
        bool(re.search(r"/|\.\w{1,8}$", default))
        or any(word in text for word in WORDS)
        or name.endswith(("_file", "_dir", "_path", "_prompt"))
    )


def path_keys() -> list[str]:
    """Every key of trust.toml and society.toml (each section's model) that names a path."""
    from agents import config as society
    from agents.backpass.config import BackpassConfig
    from agents.build.config import BuildConfig as Build
    from agents.expedition.config import ExpeditionConfig
    from agents.gateway.config import BackendConfig, GatewayConfig
    from agents.memory.namespaces import MemoryConfig
    from agents.seats.tables import CmdSeatConfig, LocalSeatConfig, OpenAISeatConfig
    from trust.table import TrustTable

    sections: dict[str, type[BaseModel]] = {
        "[room]": society.RoomConfig, "[hub]": society.HubConfig,
        "[lurker]": society.LurkerDefaults, "[logs]": society.LogsConfig,
        "[web]": society.WebConfig, "[roots]": society.RootsConfig,
        "[nicks.NAME]": society.NickConfig, "[backpass]": BackpassConfig,
        "[gateway]": GatewayConfig, "[gateway.backends.NAME]": BackendConfig,
        "[memory]": MemoryConfig, "[expedition]": ExpeditionConfig, "[build]": Build,
        "[seats.NAME]": CmdSeatConfig, "[seats.NAME] openai": OpenAISeatConfig,
        "[seats.NAME] local": LocalSeatConfig,
    }  # fmt: skip
    found = [
        f"{label.split(' ')[0]} {name}"
        for label, model in sections.items()
        for name, field in model.model_fields.items()
        if _is_text(field.annotation) and (label == "[roots]" or _names_a_path(name, field))
    ]
    found += [
        f"trust.toml {f.name}"
        for f in dataclasses.fields(TrustTable)
        if f.type == "Path" and f.name != "path"
    ]
    return found


def test_every_key_that_names_a_path_is_hidden_or_visible_on_purpose() -> None:
    """A new key naming a file must be put in agents/privateplaces.py: hidden, or visible
    with a reason. The walk finds the keys it must (it is no empty net)."""
    listed = {key.key for key in (*SECRET_KEYS, *PRIVATE_KEYS)} | set(VISIBLE_KEYS)
    found = path_keys()
    assert {"trust.toml secret_file", "[gateway] ledger", "[backpass] private"} <= set(found)
    assert sorted(set(found) - listed) == []


def test_each_private_key_set_outside_the_home_is_hidden(tmp_path: Path) -> None:
    """Every hidden key of trust.toml and society.toml, pointed outside the home, is in the
    fence's list; so are the fixed places (the web sessions, the gateway's recordings)."""
    society = Society(tmp_path / "home")
    root, out = society.root, tmp_path / "elsewhere"
    expected: dict[str, Path] = {}
    for key in {*path_keys()} & {k.key for k in (*SECRET_KEYS, *PRIVATE_KEYS)}:
        place = out / re.sub(r"\W+", "-", key).strip("-")
        where, name = key.split(" ")
        if where == "trust.toml":
            _set_trust(root, name, place)
        else:
            _set_section(root, where.strip("[]"), name, str(place))
        expected[key] = place.resolve()
    hidden = fence_hidden(society.home)
    assert {key: place for key, place in expected.items() if place not in hidden} == {}
    assert len(expected) >= 12, expected
    fixed = [root / "state" / "web-sessions.sqlite", root / "state/gateway/recording.sqlite"]
    assert all(place.resolve() in hidden for place in fixed)


def test_a_private_place_inside_a_seats_writable_folder_stays_hidden(tmp_path: Path) -> None:
    """Under strict a seat's `writable` folders are bound after the hidden places: one that
    holds the secret kept outside the home must not show it again. The seat writes there,
    and reads the secret blank."""
    outside = outside_home(tmp_path)
    keys = tmp_path / "elsewhere" / "keys"
    secret = keys / "post-secret"
    script = tmp_path / "reader.py"
    script.write_text(
        READ_NOW.format(paths=[str(secret)], out="'seat-read.json'")
        + f"pathlib.Path({str(keys / 'agent-state')!r}).write_text('state')\n"
    )
    root = outside.society.root
    set_seat(root, "wide", f'kind = "cmd"\ncommand = ["{sys.executable}", "{script}"]\n'
             f'writable = ["{keys}"]')  # fmt: skip
    builds = tmp_path / "builds"
    clone, cache = builds / "grind-wide", builds / "grind-wide.cache"
    clone.mkdir(parents=True)
    cache.mkdir()
    space = Workspace(clone, cache, FENCE, fence_hidden(outside.society.home))
    config = BuildConfig(root=str(builds), alias=str(tmp_path / "a"), seat_fence="strict")
    extra = {"BULLPEN_SPEC": "test_x.py", "BULLPEN_TIER": "wide", "BULLPEN_ITERATION": "1"}
    home = outside.society.home
    turn = asyncio.run(take_turn(home, "py", "wide", space, "step: code\n", extra, config))
    assert turn.ok, turn.problem
    assert (keys / "agent-state").read_text() == "state"  # its writable folder works
    seen = json.loads((clone / "seat-read.json").read_text())
    if FENCE == BWRAP:
        assert outside.leaks(json.dumps(seen)) == [], seen  # blank or refused, never read

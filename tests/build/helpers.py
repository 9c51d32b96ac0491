"""What the build tests share: a home whose [build] lies in the test's folder, tickets, seats."""

from __future__ import annotations

import asyncio
import re
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import Society, set_seat, wait_for

FAKE_CODER = Path(__file__).resolve().parent.parent / "fakes" / "fake_coder.py"
CLOSING = "Dispatch, then END YOUR TURN."


def set_build(home: Path, **keys: object) -> None:
    """Replace the home's [build] section with `keys` (TOML values written as Python reprs)."""
    path = home / "society.toml"
    text = path.read_text()
    text = re.sub(r"^\[build\]\n(?:(?!\[|# ---).*\n?)*", "", text, count=1, flags=re.M)
    lines = ["[build]"]
    for key, value in keys.items():
        if isinstance(value, list):
            rendered = "[" + ", ".join(f'"{v}"' for v in value) + "]"
        elif isinstance(value, str):
            rendered = f'"{value}"'
        else:
            rendered = str(value).lower() if isinstance(value, bool) else str(value)
        lines.append(f"{key} = {rendered}")
    path.write_text(text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n")


def coder_seat(
    home: Path,
    name: str,
    mode: str,
    timeout_s: float = 60,
    writable: list[str] | None = None,
    **env: str,
) -> None:
    """A `kind = "cmd"` code seat running tests/fakes/fake_coder.py in `mode`."""
    pairs = ", ".join(f'{k} = "{v}"' for k, v in {"FAKE_CODER_MODE": mode, **env}.items())
    places = ", ".join(f'"{place}"' for place in writable or [])
    set_seat(
        home,
        name,
        f'kind = "cmd"\ncommand = ["{sys.executable}", "{FAKE_CODER}"]\n'
        f"timeout_s = {timeout_s}\nenv = {{ {pairs} }}\nwritable = [{places}]",
    )


def start_lurkers(society: Society, nicks: tuple[str, ...]) -> None:
    """A lurker per nick, started together and waited on until each says it is lurking."""
    procs = [society.spawn(f"lurk-{nick}", "lurk", nick) for nick in nicks]
    wait_for(lambda: all("lurking" in p.output() or not p.alive() for p in procs), 90, "lurkers")
    assert all(p.alive() for p in procs), "\n".join(p.output() for p in procs)


def run_build(
    society: Society, text: str, wait: float, prefix: str = "build"
) -> tuple[str, dict[str, Any], str]:
    """Post a build to the foreman as `bullpen build` does and wait for its final report:
    (its body, its data, the thread)."""
    thread = f"{prefix}-{secrets.token_hex(4)}"

    async def say() -> None:
        home = society.home
        async with home.client(home.society.operator) as client:
            data = {"pipeline": "build", "ticket": text}
            await client.say("@foreman", "build", type="ask", data=data, thread=thread)

    asyncio.run(say())

    def final() -> dict[str, Any] | None:
        return next(
            (
                m
                for m in society.lines()
                if m.get("thread") == thread
                and m["from"] == "foreman"
                and (m.get("data") or {}).get("final")
            ),
            None,
        )

    found = wait_for(final, wait, "the build's final report")
    return found["body"], found["data"], thread


def ticket(
    repo: str,
    spec: str,
    *,
    grinder: str = "@py",
    tiers: str | None = None,
    targets: str | None = None,
    drop: str | None = None,
) -> str:
    """A valid §8.3 ticket (or, with `drop`, one without that section)."""
    step2 = f"{grinder}: SPEC: {spec}"
    if tiers:
        step2 += f" tiers={tiers}"
    if targets:
        step2 += f"\ntargets: {targets}"
    sections = {
        "PROBLEM": "Adding two numbers gives nothing at all.",
        "REPO": f"{repo} (prepared and git-initialised)",
        "TRAPS": "Do not special-case the inputs of the spec.",
        "STEP 1": f"@testdesigner: the spec at {spec} covers add and sub, no regression.",
        "STEP 2": step2,
        "Constraints": "Touch nothing outside the build dir.",
    }
    parts = [f"{name}\n{body}\n" for name, body in sections.items() if name != drop]
    return "\n".join(parts) + f"\n{CLOSING}\n"


PY_SPEC = """\
import calc


def test_add():
    assert calc.add(2, 3) == 5


def test_sub():
    assert calc.sub(2, 3) == -1
"""
PY_FIX = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
GO_SPEC = """\
package calc

import "testing"

func TestAdd(t *testing.T) {
\tif Add(2, 3) != 5 {
\t\tt.Fatal("add")
\t}
}

func TestSub(t *testing.T) {
\tif Sub(2, 3) != -1 {
\t\tt.Fatal("sub")
\t}
}
"""
GO_FIX = "package calc\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Sub(a, b int) int { return a - b }\n"
JS_SPEC = """\
const test = require('node:test');
const assert = require('node:assert');
const calc = require('./calc.js');

test('add', () => assert.strictEqual(calc.add(2, 3), 5));
test('sub', () => assert.strictEqual(calc.sub(2, 3), -1));
"""
JS_FIX = "exports.add = (a, b) => a + b;\nexports.sub = (a, b) => a - b;\n"
GAME_SPEC = """\
<!doctype html>
<html>
<head><title>paddle</title></head>
<body>
<canvas id="game" width="160" height="120"></canvas>
<script src="game.js"></script>
<script>
smoke("the game loop ran", () => window.frames >= 2);
</script>
</body>
</html>
"""
GAME_FIX = """\
const canvas = document.getElementById("game");
const ctx = canvas.getContext("2d");
window.frames = 0;
function frame() {
  window.frames += 1;
  ctx.fillStyle = "#102030";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = "#ffcc00";
  ctx.fillRect(10 + (window.frames % 100), 50, 20, 8);
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
"""


def fixing_society(
    base: Path,
    root: Path,
    env: dict[str, dict[str, str]] | None = None,
    make: Callable[[Path], Society] = Society,
) -> Society:
    """A home whose builds live under `root`, whose `fixer` code seat writes PY_FIX in one
    iteration; its hub and the build's lurkers started (`env`: a nick's own environment;
    `make`: the Society's kind, e.g. one on JetStream)."""
    solution = base / "fix"
    solution.mkdir(exist_ok=True)
    (solution / "calc.py").write_text(PY_FIX)
    root.mkdir(exist_ok=True)
    society = make(base / "home")
    set_build(society.root, root=str(root), alias=str(base / "sandbox"), max_iterations=2,
              run_timeout_s=60)  # fmt: skip
    coder_seat(society.root, "fixer", "copy", FAKE_CODER_SOLUTION=str(solution))
    society.start_hub()
    nicks = ("foreman", "sandbox", "testdesigner", "py")
    procs = [society.spawn(f"lurk-{n}", "lurk", n, env=(env or {}).get(n)) for n in nicks]
    wait_for(lambda: all("lurking" in p.output() or not p.alive() for p in procs), 90, "lurkers")
    assert all(p.alive() for p in procs), "\n".join(p.output() for p in procs)
    return society


def calc_ticket(base: Path, root: Path, name: str) -> Path:
    """A fresh campaign `<root>/<name>` holding the red PY_SPEC, and its ticket's file."""
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "tests/test_calc.py").write_text(PY_SPEC)
    path = base / f"{name}-ticket.md"
    path.write_text(ticket(str(folder), f"{folder}/tests/test_calc.py", tiers="fixer"))
    return path

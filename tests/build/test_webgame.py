"""The webgame smoke runner: a real headless Chromium behind the grind's real fence."""

from __future__ import annotations

import asyncio
import re
import secrets
from pathlib import Path
from typing import Any

import pytest

from agents.build.cgroups import cgroup_parent
from agents.build.config import BuildConfig
from agents.build.fence import choose
from agents.build.routing import by_name, route
from agents.build.runs import SpecRun, Workspace, run_spec, syntax_problem
from agents.build.ticket import parse_ticket
from tests.build.helpers import GAME_FIX, GAME_SPEC, ticket

WEBGAME = by_name("webgame")


def _run(tmp_path: Path, game: str, spec: str = GAME_SPEC, **build: Any) -> SpecRun:
    folder, cache = tmp_path / "clone", tmp_path / "clone.cache"
    folder.mkdir(exist_ok=True)
    cache.mkdir()
    (folder / "game.test.html").write_text(spec)
    (folder / "game.js").write_text(game)
    config = BuildConfig(
        root=str(tmp_path), alias=str(tmp_path / "sandbox"), **{"run_timeout_s": 90, **build}
    )
    space = Workspace(folder, cache, choose("auto"))
    return asyncio.run(run_spec(config, WEBGAME, space, "game.test.html", spec))


def test_a_page_that_draws_passes(tmp_path: Path) -> None:
    """A game drawing on animation frames: its canvas is not blank and its smoke check holds."""
    run = _run(tmp_path, GAME_FIX)
    assert run.green and (run.passing, run.total) == (2, 2), run.output
    assert "ok 1 - canvas #game draws" in run.output


def test_a_blank_canvas_fails(tmp_path: Path) -> None:
    """An empty stub: the page loads without error, but the canvas stays blank."""
    run = _run(tmp_path, "")
    assert not run.green and (run.passing, run.total) == (0, 2), run.output
    assert "not ok 1 - canvas #game draws: it is blank" in run.output


def test_a_script_error_fails_even_when_the_canvas_drew(tmp_path: Path) -> None:
    """The game draws, then throws: the uncaught error fails every check, and says where."""
    broken = GAME_FIX + "\nwindow.setTimeout(() => missingFunction(), 10);\n"
    run = _run(tmp_path, broken)
    assert not run.green and run.passing == 0, run.output
    assert "script error: Uncaught ReferenceError: missingFunction is not defined" in run.output
    assert "game.js:" in run.output


def test_a_game_cannot_hide_its_errors_or_fake_the_report(tmp_path: Path) -> None:
    """Model-written code that swallows its errors and replaces the harness's globals still
    fails: the error is seen first, and the checks are not the page's to answer."""
    cheat = (
        "window.onerror = () => true;\n"
        "addEventListener('unhandledrejection', (e) => e.preventDefault());\n"
        'try { window.__bullpenSmoke = () => \'{"failed": [], "checks": []}\'; } catch (e) {}\n'
        "try { window.smoke = () => {}; } catch (e) {}\n"
        + GAME_FIX
        + "Promise.reject(new Error('hidden'));\nundefinedCall();\n"
    )
    run = _run(tmp_path, cheat)
    assert not run.green and run.passing == 0 and run.total == 2, run.output
    assert "undefinedCall is not defined" in run.output and "hidden" in run.output


def test_a_page_without_a_canvas_fails(tmp_path: Path) -> None:
    run = _run(tmp_path, "", spec="<html><body><p>no game</p></body></html>\n")
    assert not run.green and run.total == 1
    assert "not ok 1 - the page has a canvas" in run.output


def test_a_file_that_is_no_page_cannot_be_collected(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c/x.test.html").write_text("just words\n")
    config = BuildConfig(root=str(tmp_path), alias=str(tmp_path / "sandbox"))
    space = Workspace(tmp_path / "c", tmp_path / "c.cache", choose("auto"))
    (tmp_path / "c.cache").mkdir()
    problem = asyncio.run(syntax_problem(config, WEBGAME, space, "x.test.html"))
    assert problem is not None and "is not an HTML page" in problem


@pytest.mark.parametrize("name", ["game.test.html", "web/pong_test.html"])
def test_a_canvas_game_spec_routes_to_jsdev_in_runner_and_ticket_alike(name: str) -> None:
    """Failure mode B: the runner row and the ticket parser both speak the new file type."""
    assert route(name) is WEBGAME and WEBGAME.nick == "jsdev"
    config = BuildConfig(root="/tmp/bullpen-build", alias="/tmp/sandbox")
    checked = parse_ticket(ticket("/tmp/sandbox", f"/tmp/sandbox/{name}", grinder="@jsdev"), config)
    assert checked.language is WEBGAME and checked.spec_relative == name
    assert not checked.routed_away


# A game that holds 3 GB, 64 MB at a time, every byte touched.
HOG = (
    "window.hog = [];\n"
    "for (let i = 0; i < 48; i++) { const a = new Uint8Array(64 << 20); a.fill(7); "
    "window.hog.push(a); }\n" + GAME_FIX
)


def test_a_game_holding_far_more_than_memory_mb_is_stopped_and_said(tmp_path: Path) -> None:
    """The browser's address-space limit is lifted (it reserves tens of GB): the run's
    memory cgroup keeps [build] memory_mb, the kernel stops the game, and the result says
    so; where no memory cgroup can be made, the result says memory was not bounded."""
    run = _run(tmp_path, HOG, memory_mb=512)
    assert not run.green and not run.timed_out, run.output
    if cgroup_parent("memory") is None:
        assert "[memory NOT bounded: this runner's address-space limit is lifted" in run.output
        return
    assert re.search(
        r"\[the run hit its memory bound of 512 MB \(\[build\] memory_mb\): the kernel "
        r"killed \d+ of its processes\]",
        run.output,
    ), run.output


def test_an_ordinary_game_runs_within_a_small_memory_bound(tmp_path: Path) -> None:
    """The bound is on what the game holds, not what the browser reserves: 512 MB is room."""
    run = _run(tmp_path, GAME_FIX, memory_mb=512)
    assert run.green, run.output
    assert "memory bound" not in run.output


READER = """
function read(url) {
  try {
    const x = new XMLHttpRequest();
    x.open("GET", url, false);
    x.send();
    return x.status === 200 || x.status === 0 ? x.responseText : "status " + x.status;
  } catch (e) { return "refused: " + e.name; }
}
window.inside = read("inside.txt");
window.reads = [read("OUTSIDE_URL"), read("../outside.txt"), read("link.txt"),
                read("/../../outside.txt")];
"""
READ_SPEC = GAME_SPEC.replace(
    "<script>\nsmoke(",
    '<script>\nsmoke("reads its own folder", () => window.inside === "INSIDE-OK");\n'
    'smoke("reads nothing outside", () => !window.reads.some((r) => r.includes("CANARY")));\n'
    "smoke(",
)


def test_a_games_js_reads_its_own_folder_and_nothing_outside(tmp_path: Path) -> None:
    """The game's script asks for a file beside the clone by file:// URL, by `..`, and
    through a link in its folder: it gets none of them, while its own file reads."""
    canary = f"CANARY-{secrets.token_hex(8)}"
    outside = tmp_path / "outside.txt"
    outside.write_text(canary)
    folder = tmp_path / "clone"
    folder.mkdir()
    (folder / "inside.txt").write_text("INSIDE-OK")
    (folder / "link.txt").symlink_to(outside)
    game = READER.replace("OUTSIDE_URL", outside.as_uri()) + GAME_FIX
    assert "reads nothing outside" in READ_SPEC
    run = _run(tmp_path, game, spec=READ_SPEC)
    assert canary not in run.output
    assert run.green and (run.passing, run.total) == (4, 4), run.output

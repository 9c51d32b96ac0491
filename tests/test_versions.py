"""Versions people can see (issue 39): `bullpen --version`, the hub's /health, each pong,
each long-running process's first log line, and `bullpen trust check` naming a society
that runs mixed versions."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from room.version import __version__
from tests.support import HTTP, REPO, Proc, Society, start_up, wait_for

ANOTHER = "0.1.1.dev0"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agents.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_version_is_one_word_and_the_one_pyproject_builds() -> None:
    done = cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"bullpen {__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|rc\d+)?", __version__)
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["dynamic"]["version"] == {"attr": "room.version.__version__"}


def test_version_json_says_what_it_runs_on() -> None:
    for argv in (("--version", "--json"), ("--json", "--version")):
        done = cli(*argv)
        assert done.returncode == 0, done.stderr
        said = json.loads(done.stdout)
        assert said["version"] == __version__
        assert said["python"] == platform.python_version()
        assert said["platform"] == platform.platform()
        # the test extra is installed where the suite runs: every package it lists is there
        assert said["extras"]["test"] == {"present": True, "missing": []}


def test_version_with_a_command_is_still_a_usage_error() -> None:
    done = cli("--json")
    assert done.returncode == 2 and "bullpen" in done.stderr


def another_version(tmp_path: Path) -> Path:
    """A copy of this bullpen's code that says it is another version: a real program of
    another release, as a society mid-upgrade runs it."""
    copy = tmp_path / "other-bullpen"
    ignore = shutil.ignore_patterns("__pycache__")
    for part in ("room", "trust", "agents", "config", "systemd", "docs"):
        shutil.copytree(REPO / part, copy / part, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    version = copy / "room" / "version.py"
    text = version.read_text().replace(f'"{__version__}"', f'"{ANOTHER}"')
    assert ANOTHER in text
    version.write_text(text)
    return copy


def test_health_logs_pongs_and_trust_check_show_mixed_versions(
    society: Society, tmp_path: Path
) -> None:
    nicks = [n for n in society.home.society.nicks if n != "echo"]
    up = start_up(society, ready=True, nicks=tuple(nicks))
    health = HTTP.get(f"{society.strict_url}/health", timeout=5).json()
    assert health["version"] == __version__
    hub_log = (society.root / "logs" / "hub.log").read_text()
    listening = next(json.loads(x) for x in hub_log.splitlines() if '"hub listening"' in x)
    assert listening["version"] == __version__
    foreman_log = (society.root / "logs" / "foreman.log").read_text()
    assert f'"version": "{__version__}"' in foreman_log

    # -P: the copy on PYTHONPATH, not the checkout the tests run in (python -m puts the
    # working folder first otherwise).
    older = Proc(
        [sys.executable, "-P", "-m", "agents.cli", "--home", str(society.root), "lurk", "echo"],
        tmp_path / "echo.log",
        env={"PYTHONPATH": str(another_version(tmp_path))},
    )
    society.procs.append(older)
    wait_for(lambda: "lurking" in older.own_output() or not older.alive(), 30, "echo to lurk")
    assert f'"version": "{ANOTHER}"' in older.own_output()

    done = subprocess.run(
        [sys.executable, "-m", "agents.cli", "--home", str(society.root), "trust", "check"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    up.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    echo_row = next(r for r in done.stdout.splitlines() if r.startswith("echo "))
    foreman_row = next(r for r in done.stdout.splitlines() if r.startswith("foreman "))
    assert ANOTHER in echo_row and __version__ in foreman_row
    said = next(r for r in done.stdout.splitlines() if r.startswith("versions: "))
    assert said.startswith(f"versions: MIXED — {__version__}: hub, ")
    assert said.endswith(f"; {ANOTHER}: echo")

"""The units `bullpen units install` renders run whatever installed bullpen, and keep
running it after an upgrade of it (issue 39): a virtualenv's own `bin/bullpen`, a PATH
entry named as found (never resolved into the versioned folder it may link to)."""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from agents.cli import units
from room.version import __version__
from tests.support import REPO, Society

SCRIPT = """#!{python}
import sys
from agents.cli import entry
sys.exit(entry())
"""


def make_venv(where: Path) -> Path:
    """A real virtualenv whose `bin/bullpen` is the console script pip writes (a shebang to
    the venv's python); bullpen's code and its libraries come in through a .pth file, as an
    install would put them on its path."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120
    )
    site = Path(
        subprocess.run(
            [
                str(where / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
    )
    ours = sysconfig.get_paths()
    (site / "bullpen-test.pth").write_text(f"{REPO}\n{ours['purelib']}\n{ours['platlib']}\n")
    script = where / "bin" / "bullpen"
    script.write_text(SCRIPT.format(python=where / "bin" / "python"))
    script.chmod(0o755)
    return script


def exec_start(unit: Path) -> str:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(unit)
    return parser["Service"]["ExecStart"]


def test_a_virtualenvs_units_run_its_own_script_across_an_upgrade(
    society: Society, tmp_path: Path
) -> None:
    script = make_venv(tmp_path / "venv")
    target = tmp_path / "units"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(script), "--home", str(society.root), "units", "install", "--dir", str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    hub = exec_start(target / "bullpen-hub.service")
    assert hub.startswith(f":{script} --home "), hub
    # the venv's own path, not the interpreter it links to
    assert str((tmp_path / "venv" / "bin" / "python").resolve()) not in hub

    # An upgrade of the interpreter under the venv (`python -m venv --upgrade`, what a
    # distribution's Python update asks for) keeps the path the unit names working.
    subprocess.run(
        [sys.executable, "-m", "venv", "--upgrade", "--without-pip", str(tmp_path / "venv")],
        check=True,
        timeout=120,
    )
    program = hub.removeprefix(":").split(" ")[0]
    ran = subprocess.run(
        [program, "--version"], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env
    )
    assert ran.returncode == 0 and ran.stdout == f"bullpen {__version__}\n", ran.stderr


def test_a_path_entry_is_named_as_found_not_where_it_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package manager's PATH link into a versioned folder (Homebrew's Cellar/<version>,
    a Nix store path): the unit names the link, which the next version keeps."""
    versioned = tmp_path / "cellar" / "bullpen" / "0.1.0" / "bin"
    versioned.mkdir(parents=True)
    (versioned / "bullpen").write_text("#!/bin/sh\n")
    (versioned / "bullpen").chmod(0o755)
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "bullpen").symlink_to(versioned / "bullpen")
    monkeypatch.setenv("PATH", f"{on_path}{os.pathsep}{os.environ['PATH']}")
    command = units.bullpen_command(str(tmp_path / "elsewhere" / "python3"))
    assert command == [str(on_path / "bullpen")]


def test_with_no_script_the_interpreter_runs_the_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    python = str(tmp_path / "venv" / "bin" / "python")
    assert units.bullpen_command(python) == [python, "-m", "agents.cli"]

"""The distribution ships every package and every file `bullpen init` and `units` need."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from tests.support import REPO


def test_every_package_is_listed() -> None:
    """Each folder with an __init__.py under room/, trust/, agents/ is in pyproject's packages."""
    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(REPO).parts)
        for top in ("room", "trust", "agents")
        for init in (REPO / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


_IGNORED = shutil.ignore_patterns(".git", "*.egg-info", "__pycache__", ".*cache")


def _ignored(folder: str, names: list[str]) -> set[str]:
    """What the copy leaves out: a setuptools build/ at the top only (agents/build is code)."""
    top = {"build"} & set(names) if Path(folder) == REPO else set()
    return set(_IGNORED(folder, names)) | top


def test_wheel_carries_defaults_and_unit_templates(tmp_path: Path) -> None:
    """A built wheel holds config/ as agents.defaults and systemd/ as agents.unitfiles."""
    source = tmp_path / "src"  # build from a copy: a build leaves build/ in its source tree
    shutil.copytree(
        REPO,
        source,
        ignore=_ignored,
    )
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    wheel = next(tmp_path.glob("bullpen-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "agents/defaults/society.toml",
        "agents/defaults/trust.toml",
        "agents/defaults/prompts/analysis-prompt.md",
        "agents/defaults/demo/kb/corpus_index.md",
        "agents/unitfiles/bullpen-hub.service",
        "agents/unitfiles/bullpen-lurker@.service",
        "agents/unitfiles/bullpen-backpass.timer",
        "agents/expedition/pipeline.py",
        "agents/backpass/pipeline.py",
        "agents/seats/judge.py",
        "agents/gateway/server.py",
        "agents/unitfiles/bullpen-gateway.service",
        "agents/unitfiles/bullpen-web.service",
        "agents/web/templates/page.html",
        "agents/web/static/app.js",
        "agents/web/static/style.css",
        "agents/unitfiles/bullpen-gateway-summary.timer",
        "agents/docs/operating.md",  # `bullpen docs operating`, which error messages name
    ):
        assert needed in names, needed


def test_build_is_quiet_and_ships_the_license_and_version(tmp_path: Path) -> None:
    """`python -m build` (sdist, then the wheel from it, with a current setuptools) warns of
    no data it would leave out, and both carry LICENSE and room/version.py's version."""
    from room.version import __version__

    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=_ignored)
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "would be ignored" not in said and "absent from the `packages`" not in said
    wheel = tmp_path / "dist" / f"bullpen-{__version__}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    assert f"bullpen-{__version__}.dist-info/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read(f"bullpen-{__version__}.dist-info/METADATA").decode()
    assert f"\nVersion: {__version__}\n" in metadata and "License-Expression: MIT" in metadata
    import tarfile

    with tarfile.open(tmp_path / "dist" / f"bullpen-{__version__}.tar.gz") as sdist:
        assert f"bullpen-{__version__}/LICENSE" in sdist.getnames()

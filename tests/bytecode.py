"""Bytecode for the run's own processes, when the environment lets none of them write it.

The suite starts about 1,700 Python processes: hubs, lurkers, gateways and commands.
With PYTHONDONTWRITEBYTECODE set (this machine's image sets it), none of them writes
the .pyc of a bullpen module it imports, so each one compiles every such module from
source again: about 60 ms more CPU for a hub's start, on the two cores the suite keeps
busy (docs/performance.md, "The test suite's time"). So the run's controller compiles
bullpen's packages once (about 0.5 s), before any xdist worker starts, into the
checkout's own `__pycache__` folders (git ignores them), and removes every file it wrote
there when the run ends: the checkout is left as the run found it, as the variable asks.
"""

from __future__ import annotations

import compileall
import contextlib
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("agents", "room", "trust")  # what every bullpen process imports; tests/ holds data


class Bytecode:
    """Compiles packages at the start of the run and takes back what it wrote."""

    def __init__(self, root: Path = REPO, packages: tuple[str, ...] = PACKAGES) -> None:
        self.folders_in = [root / package for package in packages]
        self.files: list[Path] = []
        self.folders: list[Path] = []

    def cached_files(self) -> set[Path]:
        """Every compiled file in the packages' `__pycache__` folders."""
        return {path for folder in self.folders_in for path in folder.rglob("__pycache__/*.pyc")}

    def compile(self) -> None:
        files_before = self.cached_files()
        folders_before = {path.parent for path in files_before}
        for folder in self.folders_in:  # an up-to-date .pyc is kept as it is
            compileall.compile_dir(folder, quiet=2)
        written = self.cached_files() - files_before
        self.files = sorted(written)
        self.folders = sorted({path.parent for path in written} - folders_before, reverse=True)

    def remove(self) -> None:
        for path in self.files:
            path.unlink(missing_ok=True)
        for folder in self.folders:  # deepest first; one something else wrote into stays
            with contextlib.suppress(OSError):
                folder.rmdir()


def pytest_configure(config: pytest.Config) -> None:
    if not sys.flags.dont_write_bytecode or hasattr(config, "workerinput"):
        return  # the processes write their own; or an xdist worker: the controller did it
    bytecode = Bytecode()
    bytecode.compile()
    config.stash[_KEY] = bytecode


def pytest_unconfigure(config: pytest.Config) -> None:
    bytecode = config.stash.get(_KEY, None)
    if bytecode is not None:
        bytecode.remove()


_KEY = pytest.StashKey[Bytecode]()

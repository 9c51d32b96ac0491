"""Where the shipped data lives: config/, systemd/ and docs/ from a wheel or a checkout.

Installed, they are the packages agents.defaults, agents.unitfiles and agents.docs; run
from a source checkout (`python -m agents.cli` in the repository), they are
the folders themselves.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

_SOURCE = Path(__file__).resolve().parent.parent


def data_dir(package: str, folder: str) -> Path:
    beside = _SOURCE / folder
    if (_SOURCE / "pyproject.toml").is_file() and beside.is_dir():
        # A checkout's own folder, even when another checkout is installed editable.
        return beside
    try:
        return Path(str(importlib.resources.files(package)))
    except ModuleNotFoundError:
        return _SOURCE / folder


def defaults() -> Path:
    """The defaults `bullpen init` lays down (config/)."""
    return data_dir("agents.defaults", "config")


def unit_templates() -> Path:
    """The systemd user unit templates (systemd/)."""
    return data_dir("agents.unitfiles", "systemd")


def docs_dir() -> Path:
    """The operator docs (docs/), which `bullpen docs NAME` prints."""
    return data_dir("agents.docs", "docs")

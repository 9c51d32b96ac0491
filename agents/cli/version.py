"""`bullpen --version`: which bullpen this is, and (`--json`) what it runs on.

The version comes from room/version.py (its docstring says why there and not the
installed distribution's metadata). `--json` adds what a bug report needs: the
Python and platform, where the code was loaded from, and for each optional extra
of pyproject.toml whether everything it lists is installed.
"""

from __future__ import annotations

import json
import platform
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

from room.version import __version__

_SOURCE = Path(__file__).resolve().parents[2]
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _extras() -> dict[str, list[str]]:
    """Each optional extra's requirement names: from the checkout's pyproject.toml when the
    code runs from one, else from the installed distribution's metadata."""
    pyproject = _SOURCE / "pyproject.toml"
    if pyproject.is_file():
        optional = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"].get(
            "optional-dependencies", {}
        )
        return {extra: _names(reqs) for extra, reqs in optional.items()}
    try:
        requires = metadata.distribution("bullpen").requires or []
    except metadata.PackageNotFoundError:
        return {}
    found: dict[str, list[str]] = {}
    for req in requires:
        marker = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        if marker:
            found.setdefault(marker.group(1), []).extend(_names([req]))
    return found


def _names(requirements: list[str]) -> list[str]:
    return [m.group(1) for r in requirements if (m := _NAME.match(r))]


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def info() -> dict[str, Any]:
    """What `bullpen --version --json` prints."""
    extras = {}
    for extra, names in sorted(_extras().items()):
        missing = [name for name in names if not _installed(name)]
        extras[extra] = {"present": not missing, "missing": missing}
    return {
        "version": __version__,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "executable": sys.executable,
        "source": str(_SOURCE),
        "extras": extras,
    }


def print_version(as_json: bool) -> int:
    if as_json:
        print(json.dumps(info(), indent=2))
    else:
        print(f"bullpen {__version__}")
    return 0


def version_request(argv: list[str]) -> bool | None:
    """For `bullpen --version` and `bullpen --version --json` (in either order): whether
    JSON was asked for; None for any other command line, which the parser handles."""
    if "--version" not in argv or not set(argv) <= {"--version", "--json"}:
        return None
    return "--json" in argv

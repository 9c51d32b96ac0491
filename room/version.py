"""bullpen's version: the one place it is written.

pyproject.toml reads it (`[tool.setuptools.dynamic]`, statically, without importing
room), so the built distribution, `bullpen --version`, the hub's `/health`, every
lurker's pong and every long-running process's first log line all say the same.

Why a constant here rather than asking importlib.metadata for the installed
distribution: run from a checkout (`PYTHONPATH=checkout python -m agents.cli`) beside
an installed copy, the metadata names the installed copy, not the code running; and
the lean lurker idles on the standard library, where a scan of sys.path for
`*.dist-info` at every start is a cost with nothing bought. What a version number
promises is in docs/operating.md ("Versions and upgrades").
"""

from __future__ import annotations

__version__ = "0.1.0"

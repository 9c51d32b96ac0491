"""The "Try it" blocks of docs/operating.md, docs/expedition.md and docs/backpass.md, walked
literally: each block's commands run in order in bash, in a fresh $HOME, and must succeed.

The one change made to what a reader types: `bullpen init` gets two free ports, so the
walk never meets another society on 8080/8081. `bullpen` is this checkout's CLI
(`python -m agents.cli`), as an installed `bullpen` script would be.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, free_port, record_output

DOCS = ("operating.md", "expedition.md", "backpass.md")
_BLOCK = re.compile(r"^## Try it\n.*?^```(?:sh|bash|console)?\n(?P<body>.*?)^```$", re.M | re.S)
_INIT = re.compile(r"^(bullpen init\b[^\n#]*?)(\s*#.*)?$", re.M)


def try_it(doc: str) -> str:
    """The first fenced block under the doc's `## Try it` heading."""
    found = _BLOCK.search((REPO / "docs" / doc).read_text(encoding="utf-8"))
    assert found, f"docs/{doc} has no fenced block under '## Try it'"
    return found["body"]


def on_free_ports(script: str) -> str:
    def add(match: re.Match[str]) -> str:
        ports = f" --strict 127.0.0.1:{free_port()} --relaxed 127.0.0.1:{free_port()}"
        return match[1] + ports + (match[2] or "")

    return _INIT.sub(add, script)


def bullpen_on_path(folder: Path) -> Path:
    folder.mkdir()
    script = folder / "bullpen"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m agents.cli "$@"\n')
    script.chmod(0o755)
    return folder


@pytest.mark.timeout(420)
@pytest.mark.parametrize("doc", DOCS)
def test_the_try_it_block_runs_as_written(doc: str, tmp_path: Path) -> None:
    script = on_free_ports(try_it(doc))
    assert "bullpen" in script
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{bullpen_on_path(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
    }
    env.pop("BULLPEN_HOME", None)
    walk = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = walk.communicate(timeout=400)
    finally:
        with contextlib.suppress(ProcessLookupError):  # what the block started (`up &`) too
            os.killpg(walk.pid, signal.SIGTERM)
    record_output(f"docs/{doc} Try it", output)
    assert walk.returncode == 0, f"docs/{doc} Try it failed:\n{script}\n---\n{output[-4000:]}"
    assert "Traceback" not in output

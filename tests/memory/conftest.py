"""One society for the memory tests of a module: a hub, the librarian and three members that
report what their wake handed them (a Python step, a command, an MCP agent)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.memory.helpers import EXTRA_NAMESPACES, add_member, declare, start_lurkers
from tests.support import Society

MCP_AGENT = Path(__file__).resolve().parent.parent / "mcp" / "agent.py"


@pytest.fixture(scope="package")
def hall(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Society]:
    root = tmp_path_factory.mktemp("memory") / "home"
    society = Society(root)
    declare(root, EXTRA_NAMESPACES)
    add_member(root, "stepper", handler="tests.memory.steps:told", timeout_s=20)
    add_member(root, "forker", handler="tests.memory.steps:told_forked", timeout_s=20)
    record = root / "shell-stdin.json"
    add_member(
        root,
        "shell",
        command=[sys.executable, "-m", "tests.memory.steps"],
        env={"RECORD": str(record)},
        timeout_s=20,
    )
    prompt = root / "agent-prompt.txt"
    add_member(
        root,
        "agent",
        mcp_agent=[
            "sh",
            "-c",
            f'printf %s "$1" > {prompt}; exec "{sys.executable}" {MCP_AGENT} reply "$1"',
            "agent",
            "{prompt}",
        ],
        timeout_s=30,
    )
    # stranger: privileged (so verified) but not in TRUST; nobody: in TRUST, never verified
    society_file = root / "society.toml"  # flag untrusted saves within a second, not five
    society_file.write_text(
        society_file.read_text().replace("overdue_check_s = 5", "overdue_check_s = 0.5")
    )
    trust = root / "trust.toml"
    text = re.sub(
        r"^trusted = \[(.*)\]$", r'trusted = [\1, "nobody"]', trust.read_text(), flags=re.M
    )
    trust.write_text(text.rstrip("\n") + '\nstranger = "secret"\n')
    try:
        society.start_hub()
        start_lurkers(society, "librarian", "stepper", "forker", "shell", "agent")
        yield society
    finally:
        society.stop_all()

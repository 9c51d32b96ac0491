"""What the trust check says about MCP-backed nicks (agents.mcp.check)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agents.home import Home
from agents.mcp.check import door_problems, mcp_rows
from tests.mcp.helpers import AGENT, add_key_nick
from tests.support import Society, add_nick, run_cli

STEP = "agents.mcp.handler:agent_step"
AGENT_ARGV = [sys.executable, str(AGENT), "reply", "{prompt}"]


def coder(root: Path, **config: object) -> None:
    config.setdefault("options", {"mcp_agent": AGENT_ARGV})
    add_nick(root, "coder", handler=STEP, **config)  # type: ignore[arg-type]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return Society(tmp_path / "home").root  # a fresh home; nothing is started


def test_a_sound_mcp_nick_has_no_problems(home: Path) -> None:
    """Privileged, its proof readable, its agent present: one row, no problems; others no row."""
    coder(home)
    assert mcp_rows(Home(home)) == {"coder": []}


def test_not_privileged(home: Path) -> None:
    """Its replies would be unverified: say so, unless the caller reports privilege itself."""
    coder(home, privileged=False)
    [problem] = mcp_rows(Home(home))["coder"]
    assert "not privileged" in problem and 'coder = "secret"' in problem
    assert mcp_rows(Home(home), privilege=False) == {"coder": []}


def test_a_key_this_home_does_not_hold(home: Path) -> None:
    """Privileged by its own key, but the private key is not here: the server cannot prove itself."""
    coder(home, privileged=False)
    add_key_nick(home, "coder", keep_private=False)
    [problem] = mcp_rows(Home(home))["coder"]
    assert "`bullpen mcp --as coder` cannot prove itself" in problem
    assert "coder.key does not exist" in problem


def test_a_loose_shared_secret(home: Path) -> None:
    coder(home)
    (home / "secrets" / "post-secret").chmod(0o644)
    [problem] = mcp_rows(Home(home))["coder"]
    assert "cannot prove itself" in problem and "chmod 600" in problem


def test_relaxed_without_its_token(home: Path) -> None:
    """A relaxed MCP nick needs the relaxed token, not the secret."""
    coder(home, relaxed=True)
    (home / "secrets" / "post-secret").chmod(0o644)  # irrelevant on the relaxed listener
    assert mcp_rows(Home(home)) == {"coder": []}
    (home / "secrets" / "relaxed-token").unlink()
    [problem] = mcp_rows(Home(home))["coder"]
    assert "cannot send the relaxed token" in problem and "does not exist" in problem


def test_an_unprivileged_nick_has_nothing_to_prove(home: Path) -> None:
    assert door_problems(Home(home), "stranger", relaxed=False) == []
    assert door_problems(Home(home), "operator", relaxed=False) == []


def test_the_agent_program_must_exist(home: Path) -> None:
    coder(home, options={"mcp_agent": ["no-such-agent-here", "-p", "{prompt}"]})
    [problem] = mcp_rows(Home(home))["coder"]
    assert "'no-such-agent-here' is not found" in problem


def test_the_step_needs_an_agent(home: Path) -> None:
    coder(home, options={})
    [problem] = mcp_rows(Home(home))["coder"]
    assert "names no agent" in problem and "mcp_agent" in problem


def test_bullpen_trust_check_reports_mcp_problems(home: Path) -> None:
    """`bullpen trust check --static` lists an MCP nick's problem in its row and fails."""
    add_nick(home, "native", privileged=False, mcp_agent=AGENT_ARGV)
    add_key_nick(home, "native", keep_private=False)
    done = run_cli(home, "trust", "check", "--static")
    row = next(line for line in done.stdout.splitlines() if line.startswith("native "))
    assert "`bullpen mcp --as native` cannot prove itself" in row
    assert done.returncode == 1

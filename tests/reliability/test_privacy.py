"""Reading is not free for everyone: the read token, and a home private to its user.

Another local user could read the whole room through the strict listener's
/read, and `memory/`, `runs/`, `logs/`, `state/` were created
world-readable. Now /read needs the home's read token, every reader in the
home sends it, a home from before it gets one from its hub, and nothing
bullpen creates in a home is readable by group or others.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from tests.support import HTTP, LIVE, Society, free_port, run_cli, start_up, wait_for


def _loose(root: Path) -> list[str]:
    """Every path under `root` that its group or others may read, write or enter."""
    found = []
    for where, dirs, files in os.walk(root):
        if Path(where) == root:
            dirs.remove("test-logs")  # the test harness's own output, not bullpen's
        for name in [*dirs, *files]:
            path = Path(where) / name
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and mode & 0o077:
                found.append(f"{oct(stat.S_IMODE(mode))} {path.relative_to(root)}")
    return found


@pytest.mark.long
def test_a_home_run_leaves_nothing_group_or_other_readable(tmp_path: Path) -> None:
    """init, up, say, tail, read, a backpass and audit: nothing in the home is group/other readable."""
    root = tmp_path / "home"
    strict, relaxed = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    made = run_cli(root, "init", str(root), "--demo", "--strict", strict, "--relaxed", relaxed)
    assert made.returncode == 0, made.stderr
    society = Society.__new__(Society)  # the home `bullpen init` made, driven as a user would
    society.root, society.procs = root, []
    society.strict_port, society.relaxed_port = int(strict[10:]), int(relaxed[10:])
    LIVE.append(society)  # stopped and secret-scanned like any other
    up = start_up(society)
    try:
        said = run_cli(root, "say", "@echo", "hello", "--type", "ask")
        assert said.returncode == 0, said.stderr
        read = run_cli(root, "read", "--hub")
        assert read.returncode == 0 and "hello" in read.stdout, read.stderr
        done = run_cli(root, "backpass", timeout=240)
        assert done.returncode in (0, 1), done.stderr  # it ran; its verdict is not the point
    finally:
        up.stop()
    assert run_cli(root, "audit").returncode == 0
    assert _loose(root) == []


def test_an_old_home_gets_a_read_token_from_its_hub(tmp_path: Path) -> None:
    """A home from before the read token: the hub makes it (0600) and says so; readers use it."""
    society = Society(tmp_path / "home")
    token_file = society.home.trust.read_token_file
    token_file.unlink()
    trust = society.root / "trust.toml"
    trust.write_text(re.sub(r"^read_token_file = .*\n", "", trust.read_text(), flags=re.M))
    hub = society.start_hub()
    try:
        wait_for(lambda: "created the read token file" in hub.output(), 10, "the hub's note")
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert token_file.read_text().strip() not in hub.output()
        assert HTTP.get(f"{society.strict_url}/read", timeout=10).status_code == 401
        assert run_cli(society.root, "say", "@echo", "old home").returncode == 0
        read = run_cli(society.root, "read", "--hub")
        assert read.returncode == 0 and "old home" in read.stdout, read.stderr
    finally:
        society.stop_all()


def test_reading_without_the_token_says_where_it_is(tmp_path: Path) -> None:
    """A reader whose home lacks the hub's token gets a 401 naming the token's file."""
    society = Society(tmp_path / "home")
    society.start_hub()
    try:
        token_file = society.home.trust.read_token_file
        token_file.write_text("not-the-token\n")
        done = run_cli(society.root, "read", "--hub")
        assert done.returncode != 0
        assert str(token_file) in done.stderr and "read token" in done.stderr, done.stderr
    finally:
        society.stop_all()

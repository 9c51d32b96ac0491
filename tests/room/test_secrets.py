"""Secret files: 0600, never followed through a link, never printed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from room.errors import SecretFileError
from tests.support import Society, run_cli
from trust.secretfiles import create_secret_file, read_secret_file


def test_created_0600_and_never_replaced(tmp_path: Path) -> None:
    """A new secret file is 0600 in a 0700 folder, and creating it again is refused."""
    path = tmp_path / "secrets" / "s"
    create_secret_file(path, "value")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with pytest.raises(SecretFileError, match="already exists"):
        create_secret_file(path, "other")
    assert path.read_text() == "value"


def test_creation_does_not_follow_a_symlink(tmp_path: Path) -> None:
    """A symlink planted where a secret will be created is not followed."""
    target = tmp_path / "elsewhere"
    (tmp_path / "secrets").mkdir()
    link = tmp_path / "secrets" / "s"
    link.symlink_to(target)
    with pytest.raises(SecretFileError):
        create_secret_file(link, "value")
    assert not target.exists()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_loose_permissions_are_refused_with_the_fix(tmp_path: Path, mode: int) -> None:
    """A secret readable by group or others is refused, and the message says chmod 600."""
    path = tmp_path / "s"
    create_secret_file(path, "value")
    path.chmod(mode)
    with pytest.raises(SecretFileError) as caught:
        read_secret_file(path)
    assert "chmod 600" in caught.value.message and "value" not in caught.value.message


def test_symlinked_secret_is_refused(tmp_path: Path) -> None:
    """Reading a secret through a symlink is refused."""
    real = tmp_path / "real"
    create_secret_file(real, "value")
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(SecretFileError, match="symlink"):
        read_secret_file(link)


def test_foreign_owner_is_refused(tmp_path: Path) -> None:
    """A secret owned by another user is refused, with the chown to fix it."""
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":  # .ci/run runs as root
            pytest.fail("changing a file's owner needs root, and CI runs as root")
        pytest.skip("changing a file's owner needs root")  # a real precondition, not a way to pass
    path = tmp_path / "s"
    create_secret_file(path, "value")
    os.chown(path, 12345, -1)
    with pytest.raises(SecretFileError, match="chown"):
        read_secret_file(path)


def test_hub_refuses_a_loose_secret_and_says_how_to_fix_it(society: Society) -> None:
    """The hub will not start on a group-readable secret: exit 78, with the chmod line."""
    secret_file = society.home.trust.secret_file
    secret = society.secret().decode()
    secret_file.chmod(0o644)
    hub = society.spawn("hub", "hub")
    assert hub.proc.wait(20) == 78
    out = hub.output()
    assert f"chmod 600 {secret_file}" in out
    assert secret not in out


def test_no_secret_in_any_output(society: Society) -> None:
    """Across hub logs, CLI output, error bodies and the room, the secret and token never appear."""
    hub = society.start_hub()
    secret, token = society.secret().decode(), society.token()
    outputs = [
        run_cli(society.root, "say", "@echo", "hello", "--type", "ask"),
        run_cli(society.root, "say", "@echo", "hello", "--relaxed", "--as", "echo"),
        run_cli(society.root, "say", "@echo", "x" * 70000),
        run_cli(society.root, "read"),
        run_cli(society.root, "audit"),
        run_cli(society.root, "--log-level", "debug", "trust", "check", "--static"),
    ]
    hub.stop()
    seen = "".join(o.stdout + o.stderr for o in outputs) + hub.output() + society.room.read_text()
    assert secret not in seen and token not in seen
    assert "hello" in seen  # the scan did see real output

"""The home's format record (agents/formats.py): written by init, checked at every start.

A newer home is refused before anything is read, naming both versions (exit 2); an
older one has its safe migrations run at start with a backup and a line saying so, or
is refused until `bullpen upgrade` runs them; the room file is never rewritten.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from agents import formats
from agents.gateway import recording
from agents.memory import index
from room import durable
from room.version import __version__
from tests.support import Society, run_cli


def newer(root: Path, family: str = "room", version: str = "9.0.0") -> None:
    """Make `root`'s record say a later bullpen wrote it with a newer `family` format."""
    record = formats.read_record(root)
    text = formats.render(record.made_by, record.formats | {family: 99}, version)
    formats.record_path(root).write_text(text, encoding="utf-8")


def test_init_records_the_version_and_every_format(society: Society) -> None:
    raw = tomllib.loads((society.root / "home.toml").read_text(encoding="utf-8"))
    assert raw["made_by"] == __version__ == raw["written_by"]
    assert raw["formats"] == formats.current()
    assert set(raw["formats"]) == set(formats.FORMATS)


def test_the_record_names_the_formats_files_carry_themselves() -> None:
    """Where a file holds its own version, the record's number is the same one."""
    assert formats.current()["memory_index"] == int(index.FORMAT)
    assert formats.current()["gateway_recordings"] == recording.FORMAT
    assert f"bullpen-durable-{formats.current()['durable']}".encode() == durable._MAGIC
    # A home without a record holds the first release's formats, which this one reads.
    assert set(formats.FIRST_FORMATS) == set(formats.FORMATS)
    assert not formats.too_new(formats.Record("x", "x", formats.FIRST_FORMATS, False))


@pytest.mark.parametrize(
    "command",
    [("read",), ("audit",), ("lurk", "echo"), ("hub",), ("trust", "check", "--static")],
)
def test_a_newer_home_is_refused_with_both_versions(
    society: Society, command: tuple[str, ...]
) -> None:
    newer(society.root)
    before = sorted(p.relative_to(society.root) for p in society.root.rglob("*"))
    done = run_cli(society.root, *command)
    assert done.returncode == 2, done.stderr
    assert "bullpen 9.0.0" in done.stderr and f"bullpen {__version__}" in done.stderr
    assert f"room 99 (this bullpen reads {formats.FORMATS['room'][0]})" in done.stderr
    assert "Traceback" not in done.stderr
    # Nothing was made or changed: no room file, no lock, no tree, no state.
    assert sorted(p.relative_to(society.root) for p in society.root.rglob("*")) == before


def test_a_family_this_bullpen_does_not_know_is_refused(society: Society) -> None:
    newer(society.root, family="holograms")
    done = run_cli(society.root, "read")
    assert done.returncode == 2
    assert "holograms 99 (unknown to this bullpen)" in done.stderr


def test_upgrade_refuses_a_newer_home_too(society: Society) -> None:
    newer(society.root)
    done = run_cli(society.root, "upgrade")
    assert done.returncode == 2
    assert "9.0.0" in done.stderr and __version__ in done.stderr


def test_a_damaged_record_is_a_config_error(society: Society) -> None:
    formats.record_path(society.root).write_text("made_by = [unclosed\n")
    done = run_cli(society.root, "read")
    assert done.returncode == 78
    assert "home.toml cannot be read" in done.stderr


def test_a_home_made_before_the_record_is_read_and_upgrade_writes_it(society: Society) -> None:
    formats.record_path(society.root).unlink()
    static = run_cli(society.root, "trust", "check", "--static")
    assert static.returncode == 0, static.stderr  # the first formats: read as they are
    assert not formats.record_path(society.root).exists()  # a read writes nothing
    check = run_cli(society.root, "upgrade", "--check")
    assert check.returncode == 1 and "write home.toml" in check.stdout
    done = run_cli(society.root, "upgrade")
    assert done.returncode == 0, done.stderr
    record = formats.read_record(society.root)
    assert record.present and record.formats == formats.current()
    assert record.written_by == __version__ and record.made_by == "before 0.1.0"
    assert formats.record_path(society.root).stat().st_mode & 0o077 == 0
    assert run_cli(society.root, "upgrade", "--check").returncode == 0
    again = run_cli(society.root, "upgrade")
    assert again.returncode == 0 and "is at this bullpen's formats" in again.stderr


# --- the migration mechanism, with a migration made for the test ---------------------------


def _cursor_v2(root: Path) -> list[str]:
    """A cursor format 2 for the test: the same fields under a "position" key."""
    said = []
    for cursor in sorted((root / "state").glob("*/cursor")):
        kept = formats.backup(cursor, 1)
        old = json.loads(cursor.read_text())
        cursor.write_text(json.dumps({"position": old}))
        said.append(f"rewrote {cursor} (backup: {kept})")
    return said


@pytest.fixture
def cursor_v2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(formats.FORMATS, "cursor", (2, "the test's cursor format 2"))


def test_a_safe_migration_runs_at_start_with_a_backup_and_a_line(
    society: Society,
    cursor_v2: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    step = formats.Migration("cursor", 1, True, "cursors under a position key", _cursor_v2)
    monkeypatch.setattr(formats, "MIGRATIONS", [step])
    room_before = sorted((society.root / "room").iterdir())
    cursor = society.root / "state" / "echo" / "cursor"
    original = cursor.read_bytes()
    society.home.require()  # what every command does at its start
    assert json.loads(cursor.read_text()) == {"position": json.loads(original)}
    assert (cursor.parent / "cursor.format-1.bak").read_bytes() == original
    said = capsys.readouterr().err
    assert "migrated cursor from format 1 to 2" in said and "backup:" in said
    assert formats.read_record(society.root).formats["cursor"] == 2
    assert sorted((society.root / "room").iterdir()) == room_before
    society.home.require()  # done once: nothing is pending the second time
    assert "migrated" not in capsys.readouterr().err


def test_an_unsafe_migration_waits_for_upgrade(
    society: Society, cursor_v2: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = formats.Migration("cursor", 1, False, "cursors under a position key", _cursor_v2)
    monkeypatch.setattr(formats, "MIGRATIONS", [step])
    cursor = society.root / "state" / "echo" / "cursor"
    original = cursor.read_bytes()
    with pytest.raises(formats.UpgradeNeeded, match=r"bullpen --home .* upgrade") as refused:
        society.home.require()
    assert refused.value.exit_code == 2
    assert cursor.read_bytes() == original  # nothing ran
    from argparse import Namespace

    from agents.cli.upgrade import cmd_upgrade

    assert cmd_upgrade(Namespace(home=str(society.root), check=False)) == 0
    assert json.loads(cursor.read_text()) == {"position": json.loads(original)}
    assert formats.read_record(society.root).formats["cursor"] == 2
    society.home.require()  # now at this bullpen's formats: no refusal


def test_a_missing_migration_is_named(society: Society, cursor_v2: None) -> None:
    with pytest.raises(Exception, match="no migration of cursor from format 1 to 2"):
        society.home.require()


def test_a_format_1_gateway_recording_is_migrated_at_start_and_still_read(
    society: Society,
) -> None:
    """Issue 33 keyed recordings by caller and run (format 2). A home recorded by 0.1.0
    (format 1: one `answers` table keyed by digest) is migrated at the next start, safely:
    a backup beside it, the new table added, the old answers kept and still served."""
    import contextlib
    import sqlite3

    path = society.root / formats.RECORDING
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute(
            "CREATE TABLE answers (digest TEXT PRIMARY KEY, model TEXT NOT NULL, "
            "answer TEXT NOT NULL)"
        )
        db.execute("INSERT INTO answers VALUES ('d1', 'm', '{\"old\": 1}')")
        db.commit()
    record = formats.read_record(society.root)
    old = formats.render(record.made_by, record.formats | {"gateway_recordings": 1})
    formats.record_path(society.root).write_text(old, encoding="utf-8")
    done = run_cli(society.root, "trust", "check", "--static")
    assert done.returncode == 0, done.stderr
    assert "migrated gateway_recordings from format 1 to 2" in done.stderr
    assert formats.read_record(society.root).formats["gateway_recordings"] == 2
    assert path.with_name("recording.sqlite.format-1.bak").is_file()
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    assert recording.Recording(path).answer("termgen", "exp-1", "d1") == {"old": 1}


def test_a_format_1_room_is_recorded_as_2_at_start_and_never_rewritten(society: Society) -> None:
    """Room 1 -> 2 (lines keep a shared-secret proof's nonce): any command records it, says
    so, and leaves every byte of the room as it was; a bullpen that reads room 1 only (all
    before this one) then refuses the home as too new instead of failing its audit."""
    hub = society.start_hub()
    assert run_cli(society.root, "say", "@nobody", "before the upgrade").returncode == 0
    hub.stop()
    before = society.room.read_bytes()
    record = formats.read_record(society.root)
    text = formats.render(record.made_by, record.formats | {"room": 1})
    formats.record_path(society.root).write_text(text, encoding="utf-8")
    done = run_cli(society.root, "audit")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "keep each shared-secret proof's nonce" in done.stderr
    assert formats.read_record(society.root).formats["room"] == 2
    assert society.room.read_bytes() == before

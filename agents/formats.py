"""The home's format record (`home.toml`): which bullpen made a home, and the format of
each family of files it keeps, checked at the start of every command that opens it.

    made_by = "0.1.0"          the bullpen that ran `bullpen init`
    written_by = "0.1.0"       the last bullpen that migrated it (`bullpen upgrade`)
    [formats]
    room = 1                   one integer per family below

What a version promises, and which changes need a migration, is in docs/operating.md
("Versions and upgrades"). The rules here:

- A family whose recorded format is newer than this bullpen knows (or a family it does
  not know at all) means a newer bullpen wrote the home: the command is refused before
  anything is read, naming both versions (exit 2). Never half-read.
- A family recorded older than this bullpen's has its migrations run: at start when every
  one of them is safe (each keeps a backup beside what it changes and prints a line
  saying so), else the command is refused and `bullpen upgrade` runs them.
- The room (room.jsonl) is never rewritten by a migration: the files derived from it
  (the tree, the memory index, the marks) are rebuilt from it instead.
- A home with no record was made before 0.1.0 recorded one: its formats are the first
  ones (all 1, the memory index 3), which this bullpen reads; `bullpen upgrade` writes
  the record.

The room line's own format is fixed by DESIGN.md and carries no version field: a line
without a `v` field is format 1, and a later format would add one (so an auditor handed a
lone room.jsonl tells them apart with no home). Checkpoints are C2SP signed notes whose
body other verifiers read, so their version is this record's `checkpoint`, not a line
in the note. Files that already carry their own version keep it, and the record names the
same number (the durable mark's magic `bullpen-durable-1`, the memory index's `meta`
format 3, the gateway recording's `user_version` 2, the proof bundle's
`bullpen-proof-bundle/v1`); tests/test_formats.py holds them equal.

Standard library only: the lean lurker's start check (a child) reads this too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from room.errors import ConfigError, UsageError
from room.version import __version__

RECORD = "home.toml"

# Every persistent family, its format in this bullpen, and where it lives.
FORMATS: dict[str, tuple[int, str]] = {
    "room": (
        2,
        "room/room.jsonl: the room's lines (plain, signed, relaxed, with the nonce of a "
        "shared-secret proof) and their chain",
    ),
    "tree": (1, "room/room.jsonl.tlog/level-NN: the Merkle tree's hashes"),
    "checkpoint": (1, "room/room.jsonl.tlog/checkpoint, cosignatures: signed notes"),
    "durable": (1, "room/room.jsonl.durable: the durable mark"),
    "nonces": (1, "the hub's nonce journal beside the room"),
    "cursor": (1, "state/<nick>/cursor: each lurker's place in the room"),
    "memory_index": (3, "state/memory.sqlite: the librarian's index of the room"),
    "gateway_ledger": (1, "gateway/ledger.jsonl: one line per model call"),
    "gateway_recordings": (
        2,
        "state/gateway/recording.sqlite: recorded answers by caller, run and request",
    ),
    "web_sessions": (1, "state/web-sessions.sqlite: the web view's sessions"),
    "society": (1, "society.toml: who runs and how"),
    "trust": (1, "trust.toml: PRIVILEGED and TRUST"),
}


# 0.1.0's formats, the first release's: what a home without a record holds. Never changed.
FIRST_FORMATS: dict[str, int] = {
    "room": 1,
    "tree": 1,
    "checkpoint": 1,
    "durable": 1,
    "nonces": 1,
    "cursor": 1,
    "memory_index": 3,
    "gateway_ledger": 1,
    "gateway_recordings": 1,
    "web_sessions": 1,
    "society": 1,
    "trust": 1,
}


def current() -> dict[str, int]:
    return {family: version for family, (version, _) in FORMATS.items()}


class HomeTooNew(UsageError):
    """A newer bullpen wrote this home: refused before anything is read (exit 2)."""

    code = "home_too_new"


class UpgradeNeeded(UsageError):
    """The home needs a migration that is not safe at start: `bullpen upgrade` (exit 2)."""

    code = "upgrade_needed"


@dataclass(frozen=True)
class Migration:
    """One family's step from format `source` to `source + 1`.

    `safe`: it may run at the start of any command (it keeps a backup of every file it
    changes beside the original, via `backup`); otherwise only `bullpen upgrade` runs it.
    `apply` never writes the room file: it rebuilds derived files from it.
    """

    family: str
    source: int
    safe: bool
    what: str
    apply: Callable[[Path], list[str]]  # the home's root -> lines saying what it did


RECORDING = "state/gateway/recording.sqlite"
# Format 2's table as it was made (agents/gateway/recording.py makes the same): frozen here,
# so this step makes the same table whatever a later format changes.
_RECORDED_2 = (
    "CREATE TABLE IF NOT EXISTS recorded (caller TEXT NOT NULL, run TEXT NOT NULL, "
    "digest TEXT NOT NULL, model TEXT NOT NULL, answer TEXT NOT NULL, "
    "PRIMARY KEY (caller, run, digest))"
)


def _recordings_by_caller_and_run(root: Path) -> list[str]:
    """Gateway recordings 1 -> 2 (issue 33): answers keyed by caller, run and request digest,
    not the digest alone. Format 1's answers stay in their table, still read (as any
    caller's, in any run, when nothing newer matches) and never written again."""
    path = root / RECORDING
    if path.is_symlink() or not path.is_file():
        return []  # nothing recorded yet: the gateway makes the table when it records
    import sqlite3  # here: the lean lurker's start check imports this module, not this step

    kept = backup(path, 1)
    with contextlib.closing(sqlite3.connect(path, timeout=10)) as db:
        db.execute(_RECORDED_2)
        db.execute("PRAGMA user_version = 2")
        db.commit()
    return [
        f"the gateway recording {path} keeps answers by caller and run from now on; its "
        f"earlier answers are still read (a copy of the file is at {kept})"
    ]


def _lines_keep_their_nonce(root: Path) -> list[str]:
    """Room 1 -> 2 (issue 38): a line admitted on a shared-secret proof keeps the proof's
    nonce (`nonce`, never the HMAC), and the hub rebuilds its replay set from the room's
    recent lines, so the nonce journal is read once more and never written again. Nothing
    is rewritten: format 1's lines read as they are. Recorded, so that a bullpen before
    this one (whose audit refuses a line's unknown field) refuses the home as too new."""
    if not (root / "room" / "room.jsonl").exists():
        return []
    return ["the room's new lines keep each shared-secret proof's nonce; its lines so far "
            "are read as they are (nothing was rewritten)"]  # fmt: skip


# The migrations this bullpen ships, oldest first. A format change adds its step here (and
# its test beside tests/test_formats.py), and bumps FORMATS.
MIGRATIONS: list[Migration] = [
    Migration(
        "room",
        1,
        safe=True,
        what="lines keep a shared-secret proof's nonce",
        apply=_lines_keep_their_nonce,
    ),
    Migration(
        "gateway_recordings",
        1,
        safe=True,
        what="gateway recordings keyed by caller and run",
        apply=_recordings_by_caller_and_run,
    ),
]


@dataclass
class Record:
    made_by: str
    written_by: str
    formats: dict[str, int]
    present: bool  # False: no home.toml, the formats assumed are the first ones


def record_path(root: Path) -> Path:
    return root / RECORD


def render(made_by: str, formats: dict[str, int], written_by: str | None = None) -> str:
    lines = [
        "# What made this home and the format of each family of files it keeps.",
        "# bullpen reads it at the start of every command (`bullpen docs operating`,",
        '# "Versions and upgrades"); edit it only as a migration would.',
        f'made_by = "{made_by}"',
        f'written_by = "{written_by or made_by}"',
        "",
        "[formats]",
    ]
    for family, version in formats.items():
        about = FORMATS[family][1] if family in FORMATS else ""
        lines.append(f"{family} = {version}" + (f"  # {about}" if about else ""))
    return "\n".join(lines) + "\n"


def write_record(root: Path, made_by: str, formats: dict[str, int]) -> Path:
    """Write home.toml atomically (a temporary file renamed into place), 0600."""
    path = record_path(root)
    old = read_record(root)
    text = render(old.made_by if old.present else made_by, formats, __version__)
    fd, tmp = tempfile.mkstemp(prefix=".home.toml.", dir=root)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def lay_down(root: Path) -> None:
    """`bullpen init`: the record of a new home (this version, every current format)."""
    (root / RECORD).write_text(render(__version__, current()), encoding="utf-8")


def read_record(root: Path) -> Record:
    path = record_path(root)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Record("before 0.1.0", "before 0.1.0", first_formats(), present=False)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
        raise ConfigError(
            f"the home's format record {path} cannot be read ({exc}); restore it from a "
            "backup, or move it aside and run `bullpen upgrade` to write it again"
        ) from None
    formats = raw.get("formats")
    made_by, written_by = raw.get("made_by"), raw.get("written_by", raw.get("made_by"))
    if (
        not isinstance(formats, dict)
        or not isinstance(made_by, str)
        or not isinstance(written_by, str)
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in formats.values())
    ):
        raise ConfigError(
            f"the home's format record {path} is not one bullpen writes (made_by, written_by "
            "and a [formats] table of whole numbers); restore it from a backup, or move it "
            "aside and run `bullpen upgrade` to write it again"
        )
    return Record(made_by, written_by, dict(formats), present=True)


def first_formats() -> dict[str, int]:
    """The formats of a home made before the record existed: 0.1.0's, the first release."""
    return dict(FIRST_FORMATS)


def too_new(record: Record) -> list[str]:
    """Each family this bullpen cannot read, as `name N (this bullpen reads M)`."""
    known = current()
    found = []
    for family, version in record.formats.items():
        if family not in known:
            found.append(f"{family} {version} (unknown to this bullpen)")
        elif version > known[family]:
            found.append(f"{family} {version} (this bullpen reads {known[family]})")
    return found


def pending(record: Record) -> list[Migration]:
    """The migrations that bring `record`'s formats to this bullpen's, in order."""
    steps = []
    for family, version in current().items():
        have = record.formats.get(family, version)
        while have < version:
            step = next((m for m in MIGRATIONS if m.family == family and m.source == have), None)
            if step is None:
                raise ConfigError(
                    f"this bullpen has no migration of {family} from format {have} to "
                    f"{have + 1}; install the bullpen release that ships it first (CHANGELOG.md)"
                )
            steps.append(step)
            have += 1
    return steps


def refuse_newer(root: Path, record: Record) -> None:
    """HomeTooNew, naming both versions, when a newer bullpen wrote the home."""
    newer = too_new(record)
    if newer:
        raise HomeTooNew(
            f"the home {root} was written by bullpen {record.written_by}, and this is "
            f"bullpen {__version__}, which cannot read it: {', '.join(newer)}. Nothing was "
            f"read or changed. Run bullpen {record.written_by} or later (pip install -U "
            "bullpen, or pipx upgrade bullpen)"
        )


def check(root: Path) -> Record:
    """At the start of every command that opens the home: refuse a newer home, run the safe
    migrations of an older one, refuse one that needs `bullpen upgrade`."""
    record = read_record(root)
    refuse_newer(root, record)
    steps = pending(record)
    if not steps or not record.present:  # no record: its first formats, read as they are
        return record  # (`bullpen upgrade` writes the record and runs these)
    unsafe = [step for step in steps if not step.safe]
    if unsafe:
        raise UpgradeNeeded(
            f"the home {root} (written by bullpen {record.written_by}) needs a migration "
            f"this bullpen {__version__} does not run at start: "
            f"{'; '.join(step.what for step in unsafe)}. Stop its services, then run "
            f"`bullpen --home {root} upgrade` (it keeps backups and says what it did)"
        )
    return migrate(root, record, steps)


def migrate(root: Path, record: Record, steps: list[Migration]) -> Record:
    """Run `steps` in order, recording each family's new format as soon as its step is done,
    so a failure part way leaves a record that names what is really on disk."""
    formats = dict(record.formats)
    for step in steps:
        for line in step.apply(root):
            print(f"bullpen: {line}", file=sys.stderr, flush=True)
        formats[step.family] = step.source + 1
        write_record(root, record.made_by, formats)
        print(
            f"bullpen: migrated {step.family} from format {step.source} to {step.source + 1} "
            f"({step.what})",
            file=sys.stderr,
            flush=True,
        )
    return read_record(root)


def backup(path: Path, source: int) -> Path:
    """Copy `path` to `<path>.format-<source>.bak` beside it, before a migration changes it."""
    target = path.with_name(f"{path.name}.format-{source}.bak")
    if path.is_dir():
        shutil.copytree(path, target, symlinks=True)
    else:
        shutil.copy2(path, target, follow_symlinks=False)
    return target

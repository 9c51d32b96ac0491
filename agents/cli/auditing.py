"""The audit's verdict, printed the same way for a room file and for a JetStream room.

Both `bullpen audit` paths (agents/cli/room.py for a file, agents/cli/stream.py
for a stream) load the signed checkpoint and print the result through here, so
the two cannot drift apart.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from room import durable
from room.durable import Mark
from room.errors import ConfigError, UsageError
from room.tree import Tree, tree_dir
from trust import checkpoint as checkpoints
from trust import note
from trust.audit import AuditResult, audit_file
from trust.checkpoint import Checkpoint
from trust.note import TreeHead

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from trust.table import TrustTable


def err(text: str) -> None:
    print(f"bullpen: {text}", file=sys.stderr, flush=True)


def load_checkpoint(
    path: Path, trusted: Ed25519PublicKey | None, *, given: bool
) -> Checkpoint | None:
    """The checkpoint to audit against; None (after saying why) when it cannot be trusted:
    that is an audit failure (exit 1), while a --checkpoint path that is not there is a
    usage error."""
    if given and not path.exists():
        raise UsageError(f"--checkpoint {path} does not exist; give the path of a checkpoint file")
    try:
        return checkpoints.load(path, trusted)
    except ConfigError as exc:
        err(f"FAILED: {exc.message}")
        return None


def report_audit(result: AuditResult, checkpoint: Checkpoint | None) -> int:
    """`ok: N lines` (or the first bad seq) on stdout, the rest for people on stderr."""
    if checkpoint is not None and result.ok:
        print(f"checkpoint: seq {checkpoint.seq} matches", file=sys.stderr)
    notes = (
        result.signature_note(),
        result.unmarked_note(),
        result.tree_note(),
        result.checkpoint_note(),
    )
    for text in notes:
        if text:
            print(text, file=sys.stderr)
    print(result.summary())
    return 0 if result.ok else 1


def load_tree_note(
    path: Path, trusted: Ed25519PublicKey | None, *, given: bool
) -> tuple[TreeHead | None, bool]:
    """The hub's signed tree note to audit against, and whether the audit may go on.

    Checked against the hub's key from trust.toml under the note's own origin
    (the key hash binds the name). Without that key a note found beside the
    room is left out, saying so; one given with --checkpoint is a failure.
    """
    try:
        signed = note.parse(path.read_text(encoding="utf-8"))
        head = signed.head()
    except FileNotFoundError:
        if given:
            raise UsageError(
                f"--checkpoint {path} does not exist; give the path of a checkpoint file"
            ) from None
        return None, True
    except (note.NoteError, UnicodeDecodeError, OSError) as exc:
        err(f"FAILED: the tree checkpoint {path} is not a signed note ({exc})")
        return None, False
    if trusted is None:
        if given:
            err(f"FAILED: trust.toml names no hub_public_key to check {path} with")
            return None, False
        err(f"the tree checkpoint {path} was not checked: trust.toml names no hub_public_key")
        return None, True
    if not signed.verify(note.Verifier(head.origin, trusted)):
        err(
            f"FAILED: the tree checkpoint {path} is not signed by the hub's key; it was altered "
            "or comes from another hub"
        )
        return None, False
    return head, True


def stored_tree(room: Path) -> Tree | None:
    """The hub's own tree files beside the room, opened read-only (None: there are none)."""
    try:
        return Tree(tree_dir(room), readonly=True)
    except OSError:
        return None


def is_note(path: Path) -> bool:
    """A C2SP signed note rather than the JSON checkpoint (which starts with `{`)."""
    try:
        with path.open("rb") as f:
            return not f.read(1).startswith(b"{")
    except OSError:
        return False


def records_beside(room: Path) -> list[str]:
    """What the hub left beside `room` that says how many lines it held (for a missing room).

    Read without checking signatures: each only makes the audit fail, never pass.
    """
    from room.service import checkpoint_file
    from room.tlog import note_path

    found = []
    try:
        seq = checkpoints.load(checkpoint_file(room)).seq
        found.append(f"the checkpoint {checkpoint_file(room)} records {seq} lines")
    except ConfigError:
        if checkpoint_file(room).exists():
            found.append(f"the checkpoint {checkpoint_file(room)} is there")
    try:
        size = note.parse(note_path(room).read_text(encoding="utf-8")).head().size
        found.append(f"the signed tree note {note_path(room)} records {size} lines")
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError, note.NoteError):
        found.append(f"the signed tree note {note_path(room)} is there")
    mark = durable.load(room)
    if mark is not None and mark.seq:
        found.append(f"the durable mark {durable.mark_path(room)} records {mark.seq} lines")
    return found


def missing_room(room: Path) -> int | None:
    """Exit 1 with what is missing when the hub's records beside a missing room say it held
    lines (None: nothing says so, the room was never started)."""
    found = records_beside(room)
    if not found:
        return None
    print(
        f"FAILED at seq 1: the room {room} is missing, but {'; '.join(found)}: the room was "
        "deleted or moved. Restore it from a backup (the hub refuses to start without it)"
    )
    return 1


def check_mark(result: AuditResult, room: Path, mark: Mark | None) -> None:
    """Fail `result` when the durable mark beside `room` records more than it holds, or
    another last line: acknowledged lines were cut off or the room was replaced.

    `mark` is read before the room: the hub publishes it only after the lines it
    names are in the file, so a live hub's growth never reads as a cut."""
    if not result.ok or mark is None or mark.seq == 0:
        return
    where = durable.mark_path(room)
    if mark.seq > result.lines:
        result.fail(
            result.lines + 1,
            f"the room ends at seq {result.lines}, but its durable mark {where} records "
            f"{mark.seq} lines the hub fsynced: lines {result.lines + 1}-{mark.seq} are missing "
            "(cut off, or the room was replaced); restore the room from a backup",
        )
    elif mark.seq == result.lines and result.head != mark.hash:
        result.fail(
            mark.seq,
            f"line {mark.seq} is not the one the durable mark {where} records as fsynced: "
            "the room was rewritten or replaced",
        )


def audit_with_checkpoints(
    copy: Path,
    explicit: str | None,
    table: TrustTable | None,
    public_keys: dict[str, Ed25519PublicKey] | None,
    beside: Path | None,
) -> int:
    """Audit the room file `copy` against the hub's checkpoints and print the verdict.

    `explicit` is --checkpoint (a JSON checkpoint or a tree note); `beside` is
    the home's room path, whose checkpoint, tree note and tree files are used
    when they are there (None: a room file named by path, only what was given).
    """
    from room.service import checkpoint_file
    from room.tlog import note_path

    trusted = table.hub_public_key if table is not None else None
    given = Path(explicit) if explicit else None
    json_path = tree_path = None
    if given is not None and is_note(given):
        tree_path = given
    elif given is not None:
        json_path = given
    if beside is not None:
        if json_path is None and checkpoint_file(beside).exists():
            json_path = checkpoint_file(beside)
        if tree_path is None and note_path(beside).exists():
            tree_path = note_path(beside)
    checkpoint = None
    if json_path is not None:
        checkpoint = load_checkpoint(json_path, trusted, given=json_path == given)
        if checkpoint is None:
            return 1
    tree, stored = None, None
    if tree_path is not None:
        tree, fine = load_tree_note(tree_path, trusted, given=tree_path == given)
        if not fine:
            return 1
    if tree is not None and beside is not None:
        stored = stored_tree(beside)
    mark = durable.load(beside) if beside is not None else None
    try:
        result = audit_file(copy, public_keys, checkpoint, tree, stored)
    finally:
        if stored is not None:
            stored.close()
    if beside is not None:
        check_mark(result, beside, mark)
    return report_audit(result, checkpoint)

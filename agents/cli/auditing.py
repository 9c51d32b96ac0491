"""The audit's verdict, printed the same way for a room file and for a JetStream room.

Both `bullpen audit` paths (agents/cli/room.py for a file, agents/cli/stream.py
for a stream) load the signed checkpoint and print the result through here, so
the two cannot drift apart.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from room.errors import ConfigError, UsageError
from trust import checkpoint as checkpoints
from trust.audit import AuditResult
from trust.checkpoint import Checkpoint

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


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
    for note in (result.signature_note(), result.unmarked_note(), result.checkpoint_note()):
        if note:
            print(note, file=sys.stderr)
    print(result.summary())
    return 0 if result.ok else 1

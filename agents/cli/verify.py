"""`bullpen verify`: check signed checkpoints, a line's inclusion and a tree's consistency.

Every check uses only the hub's verifier key (and `--witness` keys): the
proofs come from the hub, or from a room file given with `--room`, and are
trusted for nothing. `--export SEQ` writes a proof bundle; `bullpen verify
BUNDLE` checks one. Exit 0 when everything asked verified, 1 when something
did not (`FAILED: …` says what), 2 for a bad argument.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Protocol

from agents.cli.auditing import err
from agents.home import Home
from agents.intake.bounded import read_bounded, read_text
from room.errors import UsageError
from room.reader import RoomFile
from room.tlog import default_origin, write_atomic
from room.tlogclient import TlogClient
from room.tree import Tree
from trust import note
from trust.note import NoteError, Verifier
from trust.tlogverify import (
    Bundle,
    check_consistency,
    check_inclusion,
    checked_note,
    line_seq,
    load_bundle,
    not_a_witness,
)


class Proofs(Protocol):
    def checkpoint(self) -> str: ...
    def inclusion(self, seq: int, size: int) -> list[bytes]: ...
    def consistency(self, old: int, new: int) -> list[bytes]: ...
    def line(self, seq: int) -> bytes: ...


class RoomProofs:
    """Proofs computed from a room file (a copy is enough), in a tree built beside it in /tmp."""

    def __init__(self, room: Path, stack: ExitStack) -> None:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bullpen-tree-")))
        self.tree = Tree(folder / "tree")
        stack.callback(self.tree.close)
        self.lines: dict[int, bytes] = {}
        self.room = room
        batch: list[bytes] = []
        with RoomFile(room) as reader:
            for _, raw in reader.lines_from(0, reader.size()):
                batch.append(raw)
                if len(batch) == 4096:
                    self.tree.append(batch)
                    batch = []
        self.tree.append(batch)

    def checkpoint(self) -> str:
        raise UsageError("with --room, give the checkpoint to check with --checkpoint FILE")

    def inclusion(self, seq: int, size: int) -> list[bytes]:
        self._fits(size)
        return self.tree.inclusion(seq - 1, size)

    def consistency(self, old: int, new: int) -> list[bytes]:
        self._fits(new)
        return self.tree.consistency(old, new)

    def _fits(self, size: int) -> None:
        if size > self.tree.size:
            raise NoteError(
                f"the room {self.room} holds {self.tree.size} lines, fewer than the "
                f"checkpoint's {size}: lines were cut off, or it is an older copy"
            )

    def line(self, seq: int) -> bytes:
        with RoomFile(self.room) as reader:
            for _, raw in reader.lines_from(
                reader.offset_after(seq - 1, reader.size()), reader.size()
            ):
                return raw
        raise NoteError(f"the room {self.room} has no line {seq}")


# A bundle is one room line (at most a few hundred KiB), 128 hashes and a checkpoint.
MAX_PROOF_FILE_BYTES = 4 * 1024 * 1024


def _read_text(path: str, what: str) -> str:
    """A checkpoint, bundle or line file, refused by its size before it is read."""
    return read_text(Path(path), MAX_PROOF_FILE_BYTES, what)


def _verifier(text: str, what: str) -> Verifier:
    try:
        return note.parse_verifier(text)
    except NoteError as exc:
        raise UsageError(f"{what}: {exc}") from None


def hub_verifier(home: Home) -> Verifier:
    """The home's hub verifier key: its hub's public key under its checkpoints' origin."""
    from trust import keys

    home.require()
    trust = home.trust
    public = trust.hub_public_key
    if public is None:
        if not trust.hub_key_file.exists():
            raise UsageError(
                "this home's hub has no key yet (trust.toml names no hub_public_key and there "
                "is no key file): start the hub once, or pass the hub's key with --key"
            )
        public = keys.load_private_key(trust.hub_key_file).public_key()
    origin = home.society.hub.tlog_origin or default_origin()
    return Verifier(origin, public)


def cmd_verifier_key(args: argparse.Namespace) -> int:
    """`bullpen trust verifier-key`: the line to hand whoever checks this hub's checkpoints."""
    print(hub_verifier(Home.at(args.home)).text())
    return 0


def _refuse_existing(out: Path) -> None:
    if out.exists() or out.is_symlink():
        raise UsageError(
            f"--out {out} exists; remove it or pick another path (nothing was overwritten)"
        )


def _write_new(out: Path, data: bytes) -> None:
    """The bundle in a new file, whole or not at all (a temp file linked into place)."""
    _refuse_existing(out)
    try:
        write_atomic(out, data, overwrite=False)
    except FileExistsError:
        _refuse_existing(out)  # it appeared while the proofs were fetched
        raise
    except OSError as exc:
        raise UsageError(f"cannot write --out {out} ({exc.strerror or exc})") from None


def _source(args: argparse.Namespace, stack: ExitStack) -> Proofs:
    if args.room:
        return RoomProofs(Path(args.room), stack)
    home = Home.at(args.home)
    home.require()
    client = TlogClient(home.society.hub.strict_url(), home.read_token())
    stack.callback(client.close)
    return client


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        return _verify(args)
    except NoteError as exc:
        err(f"FAILED: {exc}")
        print(f"FAILED: {exc}")
        return 1


def _verify(args: argparse.Namespace) -> int:
    hub = _verifier(args.key, "--key") if args.key else hub_verifier(Home.at(args.home))
    witnesses = [_verifier(text, "--witness") for text in args.witness]
    for witness in witnesses:
        problem = not_a_witness(hub, witness)
        if problem is not None:
            raise UsageError(f"--witness: {problem}")
    if args.bundle:
        if args.export or args.line or args.seq or args.since:
            raise UsageError(
                "a bundle is checked on its own: drop --export, --line, --seq, --since"
            )
        bundle = load_bundle(_read_text(args.bundle, "the bundle"))
        head = bundle.check(hub, witnesses)
        print(f"ok: line {bundle.seq} is in {head.origin}'s signed tree of {head.size} lines")
        return 0
    if args.out:
        if args.export is None:
            raise UsageError("--out names the file --export writes: add --export SEQ")
        _refuse_existing(Path(args.out))
    with ExitStack() as stack:
        source = _source(args, stack)
        text = (
            _read_text(args.checkpoint, "--checkpoint") if args.checkpoint else source.checkpoint()
        )
        head = checked_note(text, hub, witnesses)
        signers = ", ".join([hub.name, *(w.name for w in witnesses)])
        print(f"ok: checkpoint {head.origin} of {head.size} lines, signed by {signers}")
        if args.since:
            old = checked_note(_read_text(args.since, "--since"), hub)
            check_consistency(old, head, source.consistency(old.size, head.size))
            print(f"ok: the tree of {head.size} lines extends the tree of {old.size}")
        if args.export is not None:
            seq = args.export
            line = source.line(seq)
            bundle = Bundle(seq, line, source.inclusion(seq, head.size), text)
            bundle.check(hub, witnesses)  # never hand out a bundle that does not verify
            if args.out:
                _write_new(Path(args.out), bundle.dumps().encode("utf-8"))
                print(f"ok: wrote the proof bundle of line {seq} to {args.out}")
            else:
                sys.stdout.write(bundle.dumps())
            return 0
        if args.line or args.seq:
            if args.line:
                line = read_bounded(Path(args.line), MAX_PROOF_FILE_BYTES, "--line")
                line = line.removesuffix(b"\n")
                seq = line_seq(line)
                if args.seq is not None and args.seq != seq:
                    raise NoteError(f"the line in {args.line} says seq {seq}, not {args.seq}")
            else:
                seq = args.seq
                line = source.line(seq)
            check_inclusion(head, seq, line, source.inclusion(seq, head.size))
            print(f"ok: line {seq} is in the signed tree of {head.size} lines")
    return 0

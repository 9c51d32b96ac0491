"""Checking the room's tree from the outside: a signed checkpoint, a line in it, one tree in another.

Everything here needs only the hub's verifier key (and witnesses' keys, when
their cosignatures are required): no trust.toml, no room, no hub. A proof
bundle (`bullpen verify --export SEQ`) carries one line, its inclusion proof
and the checkpoint that proof leads to, so a line sent as a mail attachment
can be checked by anyone who has the key.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass

from room import strictjson
from room.errors import UsageError
from trust import merkle, note
from trust.note import NoteError, TreeHead, Verifier

BUNDLE_FORMAT = "bullpen-proof-bundle/v1"


def not_a_witness(hub: Verifier, witness: Verifier) -> str | None:
    """Why `witness` cannot vouch for `hub`'s checkpoints (None: it can).

    A witness is another key that cosigned (C2SP tlog-cosignature, type 0x04):
    the log's own signature, or any key of the log's, is never a cosignature.
    """
    if witness.public.public_bytes_raw() == hub.public.public_bytes_raw():
        return (
            f"{witness.name}'s key is the hub's own key: a witness is a different key that "
            "cosigned the checkpoint (its verifier key comes from `bullpen witness --show-key`)"
        )
    if witness.kind != note.COSIGNATURE:
        return (
            f"{witness.name}'s verifier key is a log's signing key (type 0x01), not a witness's "
            "cosignature key (type 0x04): give the key `bullpen witness --show-key` prints"
        )
    return None


def checked_note(text: str, hub: Verifier, witnesses: Sequence[Verifier] = ()) -> TreeHead:
    """The checkpoint in `text` when the hub's signature and every named witness's verify."""
    for witness in witnesses:
        problem = not_a_witness(hub, witness)
        if problem is not None:
            raise NoteError(problem)
    signed = note.parse(text)
    head = signed.head()
    if head.origin != hub.name:
        raise NoteError(
            f"the checkpoint's origin is {head.origin!r}, but the verifier key is "
            f"{hub.name!r}'s: it is another log's checkpoint, or the wrong key"
        )
    if not signed.verify(hub):
        raise NoteError(
            f"the checkpoint is not signed by {hub.name}'s key: it was altered, or signed by "
            "another key"
        )
    for witness in witnesses:
        if not signed.verify(witness):
            raise NoteError(
                f"the checkpoint carries no valid cosignature of the witness {witness.name}: "
                "fetch it again after the witness has cosigned it"
            )
    return head


def decode_proof(items: object) -> list[bytes]:
    """A `{"proof": [...]}` list as hashes; NoteError when it is not base64 of 32 bytes each."""
    if not isinstance(items, list) or len(items) > 128:
        raise NoteError("a proof is a list of at most 128 base64 hashes")
    out = []
    for item in items:
        try:
            raw = base64.b64decode(item, validate=True) if isinstance(item, str) else b""
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != 32:
            raise NoteError("a proof hash is not 32 bytes of base64")
        out.append(raw)
    return out


def line_seq(line: bytes) -> int:
    """The seq a room line says it has (its leaf index is seq - 1)."""
    try:
        seq = strictjson.loads(line).get("seq")  # a nesting bomb refused, not recursed
    except (ValueError, AttributeError):
        seq = None
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise NoteError("the line is not a room line with a seq of 1 or more")
    return seq


def check_inclusion(head: TreeHead, seq: int, line: bytes, proof: Sequence[bytes]) -> None:
    """NoteError unless `line` is leaf seq-1 of the tree the checkpoint signed."""
    if not 1 <= seq <= head.size:
        raise NoteError(f"seq {seq} is not in the checkpoint's tree of {head.size} lines")
    leaf = merkle.leaf_hash(line)
    if not merkle.verify_inclusion(seq - 1, head.size, leaf, proof, head.root):
        raise NoteError(
            f"the line is not line {seq} of the signed tree of {head.size}: its bytes were "
            "changed, or the proof is for another line or tree"
        )


def check_consistency(old: TreeHead, new: TreeHead, proof: Sequence[bytes]) -> None:
    """NoteError unless the new checkpoint's tree extends the old one's (same history)."""
    if old.origin != new.origin:
        raise NoteError(f"the checkpoints are of two logs: {old.origin!r} and {new.origin!r}")
    if old.size > new.size:
        raise NoteError(
            f"the older checkpoint ({old.size} lines) is larger than the newer ({new.size}): "
            "give them as --since OLD --checkpoint NEW"
        )
    if not merkle.verify_consistency(old.size, new.size, old.root, new.root, proof):
        raise NoteError(
            f"the tree of {new.size} lines does not extend the tree of {old.size}: the room's "
            "history was rewritten between the two checkpoints (a fork)"
        )


@dataclass(frozen=True)
class Bundle:
    """One line with everything needed to check it against the hub's key."""

    seq: int
    line: bytes
    proof: list[bytes]
    checkpoint: str

    def dumps(self) -> str:
        return (
            json.dumps(
                {
                    "format": BUNDLE_FORMAT,
                    "seq": self.seq,
                    "line": self.line.decode("utf-8"),
                    "proof": [base64.b64encode(h).decode() for h in self.proof],
                    "checkpoint": self.checkpoint,
                },
                indent=2,
                ensure_ascii=False,
            )
            + "\n"
        )

    def check(self, hub: Verifier, witnesses: Sequence[Verifier] = ()) -> TreeHead:
        head = checked_note(self.checkpoint, hub, witnesses)
        if line_seq(self.line) != self.seq:
            raise NoteError(f"the bundle's line says seq {line_seq(self.line)}, not {self.seq}")
        check_inclusion(head, self.seq, self.line, self.proof)
        return head


def load_bundle(text: str) -> Bundle:
    """The bundle in `text`; UsageError when it is not JSON a reader can take (nesting past
    strictjson's bound is refused, not recursed into), NoteError when it is not a bundle."""
    try:
        raw = strictjson.loads(text)
    except strictjson.JsonRejected as exc:
        raise UsageError(f"the bundle is not JSON bullpen reads: {exc}") from None
    try:
        if raw.get("format") != BUNDLE_FORMAT:
            raise NoteError(f"not a proof bundle: its format is not {BUNDLE_FORMAT}")
        seq, line, checkpoint = raw["seq"], raw["line"], raw["checkpoint"]
        if not isinstance(seq, int) or not isinstance(line, str) or not isinstance(checkpoint, str):
            raise TypeError
    except (ValueError, AttributeError, KeyError, TypeError):
        raise NoteError(
            "not a proof bundle: a JSON object with format, seq, line, proof and checkpoint"
        ) from None
    return Bundle(seq, line.encode("utf-8"), decode_proof(raw.get("proof")), checkpoint)

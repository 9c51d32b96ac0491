"""Auditing a room: every line is one the hub could have written, seqs run 1, 2, 3 …,
ids are unique, and the chain holds.

What the chain alone proves: no line was edited, removed, inserted, swapped
or duplicated *before* the last line, unless the whole rest of the file was
rewritten to match. What it cannot prove: that the tail was not cut off, or
that the whole file was not rewritten. A signed checkpoint from the hub
(seq and head hash at a moment) closes both gaps for everything up to it.
Signatures made with a nick's own key are checked against the public keys
in trust.toml, so authorship is verifiable with no secret at all.

A verified line of a nick that proves with its own key is one the hub could
only have written with that nick's `sig` in it, or, through the relaxed
listener, with `via: "relaxed"`. `via` is as forgeable as `verified`, so
such an unsigned line counts only where the hub's own signed record covers
it: the hub signs a tree checkpoint before it answers such a post (room/tlog.py),
and a line no checkpoint covers was appended behind its back (docs/audit.md).

With the tree's signed note (trust/note.py), the first `size` lines must
hash, as RFC 9162's Merkle tree, to the root the hub signed: a line changed,
dropped or inserted below it fails even where the chain was rewritten to
match. The hub's own tree files, when given, name the first line that differs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from room.chain import GENESIS, line_hash
from room.message import Message, Signature, check_stored, parse_line
from room.reader import RoomFile
from trust import keys, merkle
from trust.checkpoint import Checkpoint
from trust.note import TreeHead
from trust.proof import proof_bytes

if TYPE_CHECKING:
    from room.tree import Tree


@dataclass
class AuditResult:
    lines: int = 0
    head: str = GENESIS
    bad_seq: int | None = None
    reason: str | None = None
    signed: int = 0  # lines that carry a nick's own signature
    signatures: int = 0  # of those, verified against trust.toml's public keys
    unmarked: int = (
        0  # keyed nicks' verified lines with no sig and no via, all under the checkpoint
    )
    checkpoint_seq: int | None = None  # the seq the signed checkpoint vouches for
    tree_size: int | None = None  # the lines the signed tree note covers (their root matched)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.reason is None

    def fail(self, seq: int, reason: str) -> AuditResult:
        self.bad_seq, self.reason = seq, reason
        return self

    def summary(self) -> str:
        """The one line for stdout: `ok: N lines`, or the first bad seq and why."""
        if self.ok:
            return f"ok: {self.lines} lines"
        return f"FAILED at seq {self.bad_seq}: {self.reason}"

    @property
    def covered(self) -> int:
        """How many leading lines a signed checkpoint (JSON or tree note) vouches for."""
        return max(self.checkpoint_seq or 0, self.tree_size or 0)

    @property
    def beyond_checkpoint(self) -> int:
        """Lines after the last signed checkpoint: the chain alone speaks for them."""
        return self.lines - self.covered

    def tree_note(self) -> str | None:
        """For stderr: what the tree's signed root vouched for."""
        if not self.ok or self.tree_size is None:
            return None
        return f"tree: the first {self.tree_size} lines hash to the root the hub signed"

    def checkpoint_note(self) -> str | None:
        """For stderr: how much of the room no signed checkpoint covers."""
        if not self.ok:
            return None
        if self.checkpoint_seq is None and self.tree_size is None:
            return (
                f"beyond the last checkpoint: {self.lines} lines (no signed checkpoint was "
                "checked; the chain alone speaks for them)"
            )
        return (
            f"beyond the last checkpoint: {self.beyond_checkpoint} lines after seq "
            f"{self.covered} (the chain alone speaks for them)"
        )

    def unmarked_note(self) -> str | None:
        """For stderr: old lines only the checkpoint vouches for."""
        if not self.ok or not self.unmarked:
            return None
        return (
            f"unmarked: {self.unmarked} verified lines of nicks with their own key carry "
            "neither sig nor via; all lie under the signed checkpoint (written by a hub from "
            "before the via mark, or before the nick had a key)"
        )

    def signature_note(self) -> str | None:
        """For stderr: what was and was not said about authorship."""
        if not self.ok or not self.signed:
            return None
        if self.signatures == self.signed:
            return f"signatures: {self.signatures} verified against trust.toml's public keys"
        return (
            f"signatures: {self.signed} lines carry one, NOT checked: no trust.toml was given "
            "(audit from a home with --home, or drop --no-signatures)"
        )


def _check_sig(message: Message, public_keys: dict[str, Ed25519PublicKey]) -> str | None:
    assert message.sig is not None
    public = public_keys.get(message.from_)
    if public is None:
        return f"it carries a signature by {message.from_}, but trust.toml has no public key for {message.from_}"
    try:
        sig = Signature.model_validate(message.sig)
    except ValueError:
        return "its sig field is malformed"
    fields = {
        "from": message.from_,
        "to": message.to,
        "type": message.type,
        "body": message.body,
        "data": message.data,
        "in_reply_to": message.in_reply_to,
        "thread": message.thread,
    }
    if not keys.verify(public, proof_bytes(fields, sig.ts, sig.nonce), sig.value):
        return f"its signature does not verify against {message.from_}'s public key: the line was altered"
    return None


def _unprovable(message: Message, public_keys: dict[str, Ed25519PublicKey]) -> bool:
    """A keyed nick's verified line that carries no signature: only the hub's word vouches."""
    return message.verified and message.sig is None and message.from_ in public_keys


def _continues_from(following: bytes | None, raw: bytes) -> bool:
    """True when the line after `raw` records raw's exact hash as its prev."""
    if following is None:
        return False
    try:
        return parse_line(following).prev == line_hash(raw)
    except ValueError:
        return False


def _covered(checkpoint: Checkpoint | None, seq: int, raw: bytes) -> bool | None:
    """Whether the checkpoint vouches for this line (None: it does not cover this seq)."""
    if checkpoint is None or checkpoint.seq != seq:
        return None
    return line_hash(raw) == checkpoint.head


def audit_lines(
    lines: Iterable[bytes],
    public_keys: dict[str, Ed25519PublicKey] | None = None,
    checkpoint: Checkpoint | None = None,
    tree: TreeHead | None = None,
) -> AuditResult:
    """Check the lines in order; on failure name the first line that is not the original.

    A broken link between two lines is ambiguous on its own: the earlier line
    was changed, or the later one's prev was. The line after settles it (its
    prev is the hash of the later line's original bytes), or, at the end, a
    checkpoint of that seq does.
    """
    result = AuditResult(checkpoint_seq=None if checkpoint is None else checkpoint.seq)
    floor = max(0 if checkpoint is None else checkpoint.seq, 0 if tree is None else tree.size)
    folding = merkle.Folding(0 if tree is None else tree.size)
    prev_hash, expected = GENESIS, 1
    prev_raw: bytes | None = None
    ids: set[str] = set()
    stream = iter(lines)
    raw = next(stream, None)
    while raw is not None:
        following = next(stream, None)
        try:
            message = check_stored(raw)
        except ValueError as exc:
            return result.fail(
                expected, f"the line after seq {expected - 1} does not parse as a room line ({exc})"
            )
        if message.seq != expected:
            if message.seq == expected - 1 and prev_raw is not None:
                if raw == prev_raw:
                    return result.fail(
                        expected,
                        f"seq {message.seq} appears twice: this line is a copy of the one before",
                    )
                vouched = _covered(checkpoint, message.seq, raw)
                if _continues_from(following, raw) or (following is None and vouched):
                    return result.fail(
                        message.seq,
                        f"two different lines claim seq {message.seq}, and the room continues "
                        "from the second: the first was inserted or forged",
                    )
                return result.fail(
                    expected,
                    f"found seq {message.seq} again where seq {expected} belongs: a second, "
                    "different line claims it",
                )
            if message.seq < expected:
                why = f"found seq {message.seq} again or out of order where seq {expected} belongs"
            else:
                why = f"found seq {message.seq} where seq {expected} belongs: a line is missing or out of order"
            return result.fail(expected, why)
        if message.prev != prev_hash:
            if expected == 1:
                return result.fail(1, "the first line's prev is not the genesis value (64 zeros)")
            if following is not None:
                altered = not _continues_from(following, raw)
            else:
                altered = _covered(checkpoint, message.seq, raw) is False
            if altered:
                return result.fail(
                    expected,
                    f"its prev does not match seq {expected - 1}, and the line after it does not "
                    "chain to it either: this line was altered or inserted",
                )
            return result.fail(
                expected - 1,
                f"its bytes do not match the hash seq {expected} recorded as prev: seq "
                f"{expected - 1} was edited or replaced"
                + ("" if following is not None else f" (or seq {expected}'s prev was)"),
            )
        if message.id in ids:
            return result.fail(
                message.seq, f"its id {message.id} was already used by an earlier line"
            )
        ids.add(message.id)
        if message.sig is not None:
            result.signed += 1
        if message.sig is not None and public_keys is not None:
            problem = _check_sig(message, public_keys)
            if problem:
                return result.fail(message.seq, problem)
            result.signatures += 1
        if public_keys is not None and _unprovable(message, public_keys):
            if message.seq > floor:
                mark = "no via mark" if message.via is None else f"via: {message.via}"
                return result.fail(
                    message.seq,
                    f"it says {message.from_} posted it verified, with no sig ({mark}), but "
                    f"{message.from_} proves with its own key (trust.toml), and no checkpoint "
                    "the hub signed covers this line. The hub signs one before it answers such "
                    "a post, so this line was forged or edited (a via mark is as easy to forge "
                    "as verified), or the hub's checkpoint was not given (--checkpoint)",
                )
            if message.via is None:
                result.unmarked += 1  # the checkpoint vouches the hub wrote it (checked below)
        prev_hash = line_hash(raw)
        folding.add(raw)
        expected += 1
        result.lines += 1
        if _covered(checkpoint, message.seq, raw) is False:
            return result.fail(
                message.seq, "the checkpoint recorded a different line here: the file was rewritten"
            )
        prev_raw, raw = raw, following
    result.head = prev_hash
    if checkpoint is not None and result.lines < checkpoint.seq:
        return result.fail(
            result.lines + 1,
            f"the room ends at seq {result.lines}, but a checkpoint recorded seq {checkpoint.seq}: "
            "the tail was cut off",
        )
    if tree is not None:
        if result.lines < tree.size:
            return result.fail(
                result.lines + 1,
                f"the room ends at seq {result.lines}, but the hub's signed tree holds "
                f"{tree.size} lines: the tail was cut off",
            )
        if folding.root() != tree.root:
            return result.fail(
                tree.size,
                f"the first {tree.size} lines do not hash to the root the hub signed: a line "
                f"at or below seq {tree.size} was changed, dropped or inserted, and the chain "
                "rewritten to hide it",
            )
        result.tree_size = tree.size
    return result


def first_difference(lines: Iterable[bytes], stored: Tree, tree: TreeHead) -> int | None:
    """The seq of the first line that is not the leaf the hub's own tree holds there.

    Only when the stored tree is the one the hub signed (its root at the signed
    size matches): then each of its leaves is the hash of the original line.
    """
    if stored.size < tree.size or stored.root(tree.size) != tree.root:
        return None
    for index, raw in enumerate(lines):
        if index >= tree.size:
            return None
        if merkle.leaf_hash(raw) != stored.leaf(index):
            return index + 1
    return None


def audit_file(
    path: Path,
    public_keys: dict[str, Ed25519PublicKey] | None = None,
    checkpoint: Checkpoint | None = None,
    tree: TreeHead | None = None,
    stored: Tree | None = None,
) -> AuditResult:
    whole = 0

    def lines(room: RoomFile, end: int) -> Iterable[bytes]:
        nonlocal whole
        for offset, raw in room.lines_from(0, end):
            whole = offset + len(raw) + 1
            yield raw

    with RoomFile(path) as room:
        end = room.size()
        result = audit_lines(lines(room, end), public_keys, checkpoint, tree)
        if not result.ok and tree is not None and stored is not None:
            seq = first_difference(lines(room, end), stored, tree)
            if seq is not None and (result.bad_seq is None or seq < result.bad_seq):
                result.fail(
                    seq,
                    "this line is not the one the hub's signed tree holds at this seq: it was "
                    "changed, or a line before it was dropped or inserted",
                )
    if result.ok and whole < end:
        return result.fail(
            result.lines + 1,
            f"the file ends with {end - whole} bytes that are not a whole line (a torn write "
            "or a cut); the hub moves them aside when it starts",
        )
    return result

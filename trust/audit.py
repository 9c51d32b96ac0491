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
listener, with `via: "relaxed"`; a line with neither was appended behind the
hub's back. Lines a hub wrote before it kept that mark are vouched for only
by a signed checkpoint that covers them (docs/room.md, "What an audit proves").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from room.chain import GENESIS, line_hash
from room.message import Message, Signature, check_stored, parse_line
from room.reader import RoomFile
from trust import keys
from trust.checkpoint import Checkpoint
from trust.proof import proof_bytes


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
    def beyond_checkpoint(self) -> int:
        """Lines after the last signed checkpoint: the chain alone speaks for them."""
        return self.lines - (self.checkpoint_seq or 0)

    def checkpoint_note(self) -> str | None:
        """For stderr: how much of the room no signed checkpoint covers."""
        if not self.ok:
            return None
        if self.checkpoint_seq is None:
            return (
                f"beyond the last checkpoint: {self.lines} lines (no signed checkpoint was "
                "checked; the chain alone speaks for them)"
            )
        return (
            f"beyond the last checkpoint: {self.beyond_checkpoint} lines after seq "
            f"{self.checkpoint_seq} (the chain alone speaks for them)"
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
    """A keyed nick's verified line with nothing the hub would have admitted it on."""
    return (
        message.verified
        and message.sig is None
        and message.via is None
        and message.from_ in public_keys
    )


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
) -> AuditResult:
    """Check the lines in order; on failure name the first line that is not the original.

    A broken link between two lines is ambiguous on its own: the earlier line
    was changed, or the later one's prev was. The line after settles it (its
    prev is the hash of the later line's original bytes), or, at the end, a
    checkpoint of that seq does.
    """
    result = AuditResult(checkpoint_seq=None if checkpoint is None else checkpoint.seq)
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
            if checkpoint is None or message.seq > checkpoint.seq:
                return result.fail(
                    message.seq,
                    f"it says {message.from_} posted it verified, with no sig and no via mark, "
                    f"but {message.from_} proves with its own key (trust.toml): the hub admits "
                    "such a post only with its signature, or through the relaxed listener, "
                    "which marks the line via: relaxed. This line was forged or edited",
                )
            result.unmarked += 1  # the checkpoint vouches the hub wrote it (checked below)
        prev_hash = line_hash(raw)
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
    return result


def audit_file(
    path: Path,
    public_keys: dict[str, Ed25519PublicKey] | None = None,
    checkpoint: Checkpoint | None = None,
) -> AuditResult:
    whole = 0

    def lines(room: RoomFile, end: int) -> Iterable[bytes]:
        nonlocal whole
        for offset, raw in room.lines_from(0, end):
            whole = offset + len(raw) + 1
            yield raw

    with RoomFile(path) as room:
        end = room.size()
        result = audit_lines(lines(room, end), public_keys, checkpoint)
    if result.ok and whole < end:
        return result.fail(
            result.lines + 1,
            f"the file ends with {end - whole} bytes that are not a whole line (a torn write "
            "or a cut); the hub moves them aside when it starts",
        )
    return result

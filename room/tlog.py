"""The hub's transparency log: the tree kept as lines are stored, signed checkpoints, cosignatures.

The engine hands every stored line to `stored` (the JSONL writer after its
fsync, the JetStream view as it follows the stream), so the tree grows with
the room whoever appended. `sign` fsyncs the tree and writes the signed
note (trust/note.py) to `<room>.tlog/checkpoint`; the hub signs soon after
the room grows (room/service.py Checkpointer), at shutdown, and — before it answers — after
every verified line that carries no signature of a nick with its own key
(`cover`): such a line is vouched for by nothing but the hub's word, so the
hub's signed record must hold it before anyone can rely on it (issue 23:
`via` is as forgeable as `verified`; trust/audit.py refuses such a line that
no checkpoint covers, and so does the hub's start-up, `open_tlog`).

Cosignatures of the current note from the witnesses the operator configured
([hub] witnesses; one each, the newest) are kept in `<room>.tlog/cosignatures`
and served with it. Any other key is refused: with the read token anyone can
POST a cosignature, and a made-up witness must not take a real one's place.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from room.errors import BadRequest
from room.log import Filter, RoomLog, Stored
from room.message import parse_line
from room.reader import seq_of
from room.tree import Tree, tree_dir
from trust import merkle, note

log = structlog.get_logger("room.tlog")

NOTE_FILE = "checkpoint"
COSIGNATURES_FILE = "cosignatures"
PAGE = 1000


def default_origin() -> str:
    """`bullpen/<host>`: set [hub] tlog_origin before the first start if the host may be renamed."""
    host = "".join(c for c in socket.gethostname() if c.isalnum() or c in ".-") or "hub"
    return f"bullpen/{host}"


def note_path(room: Path) -> Path:
    """Where the hub keeps its latest signed checkpoint note."""
    return tree_dir(room) / NOTE_FILE


def write_atomic(path: Path, data: bytes, *, overwrite: bool = True) -> None:
    """Write, fsync, rename: a reader sees the old file or the new one, never half.

    `overwrite=False` puts the file in place with link(2), which never replaces
    one: FileExistsError when `path` exists (or appeared meanwhile), nothing written.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp" if not overwrite else path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # gone after a rename; a link leaves it behind


def load_note(path: Path, verifier: note.Verifier) -> note.Note | None:
    """The hub's signed note at `path`, or None when there is none; NoteError if it is bad."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    signed = note.parse(text)
    signed.head()
    if not signed.verify(verifier):
        raise note.NoteError(
            f"the checkpoint note {path} is not signed by the hub's key {verifier.name}"
        )
    return signed


def keyed_unsigned(raw: bytes, keyed: dict[str, Ed25519PublicKey]) -> str | None:
    """The nick, when this line says a nick with its own key posted it verified with no sig."""
    try:
        message = parse_line(raw)
    except ValueError:
        return None
    if message.verified and message.sig is None and message.from_ in keyed:
        return message.from_
    return None


class TransparencyLog:
    """The tree, the latest signed note and its cosignatures, for one hub."""

    def __init__(
        self,
        room: Path,
        tree: Tree,
        room_log: RoomLog,
        key: Ed25519PrivateKey,
        origin: str,
        witnesses: Sequence[note.Verifier] = (),
    ) -> None:
        self.folder = tree_dir(room)
        self.tree = tree
        self.log = room_log
        self.key = key
        self.origin = origin
        self.verifier = note.verifier_of(origin, key)
        # The witnesses the operator named ([hub] witnesses): only their cosignatures are kept.
        self.witnesses = {(w.name, w.hash): w for w in witnesses}
        self.grown = asyncio.Event()  # set as lines are stored: the checkpointer's cue
        self.note: note.Note | None = None
        self.cosignatures: list[note.SignatureLine] = []
        self._pending: list[tuple[int, bytes]] = []
        self._catching: asyncio.Future[None] | None = None
        self._lock = asyncio.Lock()
        self.broken: str | None = None  # why the tree stopped growing with the room

    # -- growing with the room -------------------------------------------------

    def stored(self, lines: Sequence[Stored]) -> None:
        """The engine's hook: these lines are now the room's (in seq order).

        The lines are stored whatever happens here: a tree that cannot be
        written is logged and left behind (the next start rebuilds it), never
        an error for the posters whose lines are already durable.
        """
        if self.broken is not None:
            return
        self.grown.set()
        try:
            self._grow(lines)
        except OSError as exc:
            self.broken = f"the tree could not be written ({exc.strerror or exc})"
            log.error(
                "the Merkle tree stopped growing; restart the hub to rebuild it", error=str(exc)
            )

    def _grow(self, lines: Sequence[Stored]) -> None:
        if self._catching is not None:
            self._pending.extend((line.seq, line.raw) for line in lines)
            return
        batch: list[bytes] = []
        for i, line in enumerate(lines):
            if line.seq <= self.tree.size + len(batch):
                continue
            if line.seq != self.tree.size + len(batch) + 1:  # a gap: read the room for it
                self.tree.append(batch)
                self._pending = [(later.seq, later.raw) for later in lines[i:]]
                self._catching = asyncio.ensure_future(self.catch_up())
                self._catching.add_done_callback(self._caught_up)
                return
            batch.append(line.raw)
        self.tree.append(batch)

    def _caught_up(self, task: asyncio.Future[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.broken = f"the tree could not catch up with the room ({task.exception()})"
            log.error(
                "the Merkle tree stopped growing; restart the hub to rebuild it",
                error=str(task.exception()),
            )

    async def catch_up(self) -> None:
        """Add every line the room holds beyond the tree (at start-up, or after a gap).

        Lines the engine hands in meanwhile wait in `_pending`, so the tree
        never takes a line before the ones it is still reading.
        """
        if self._catching is None:
            self._catching = asyncio.get_running_loop().create_future()
        try:
            while True:
                head = self.log.head.seq
                while self.tree.size < head:
                    await self._read_more(head)
                pending, self._pending = sorted(self._pending), []
                for seq, raw in pending:
                    if seq == self.tree.size + 1:
                        self.tree.append([raw])
                if self.log.head.seq <= self.tree.size and not self._pending:
                    return
        finally:
            self._catching = None

    async def _read_more(self, head: int) -> None:
        after = self.tree.size
        result = await self.log.read(after, PAGE, Filter())
        batch: list[bytes] = []
        for raw in result.lines:
            seq = seq_of(raw)
            while after + len(batch) + 1 < seq:  # a message /read skips: its bytes all the same
                missing = await self.log.line_at(after + len(batch) + 1)
                if missing is None:
                    break
                batch.append(missing)
            if seq == after + len(batch) + 1:
                batch.append(raw)
        if not batch:  # nothing /read gives: take the next line's bytes as they are
            missing = await self.log.line_at(after + 1)
            if missing is None:
                raise OSError(f"the room has no line {after + 1} though its head is {head}")
            batch.append(missing)
        self.tree.append(batch)

    # -- checkpoints --------------------------------------------------------------

    @property
    def signed_size(self) -> int:
        return self.note.head().size if self.note is not None else 0

    @property
    def signed_root(self) -> bytes:
        return self.note.head().root if self.note is not None else merkle.EMPTY_ROOT

    async def sign(self) -> note.Note | None:
        """Sign the tree as it is now, if it grew since the last note (None: nothing new)."""
        async with self._lock:
            return await self._sign()

    async def cover(self, seq: int) -> None:
        """Return once a signed note covers line `seq`."""
        if self.signed_size >= seq:
            return
        async with self._lock:
            if self.signed_size < seq:
                try:
                    await self._sign()
                except OSError as exc:  # stored all the same: the next checkpoint covers it
                    log.error(
                        "could not sign a checkpoint covering a line", seq=seq, error=str(exc)
                    )

    async def _sign(self) -> note.Note | None:
        size = self.tree.size
        if self.note is not None and self.signed_size == size:
            return None
        head = note.TreeHead(self.origin, size, self.tree.root())
        signed = note.sign(head.body(), self.origin, self.key)
        self.tree.flush()  # here, where the appends run; the fsync may wait in a thread
        await asyncio.to_thread(self._write_note, signed)
        self.note, self.cosignatures = signed, []
        return signed

    def _write_note(self, signed: note.Note) -> None:
        self.tree.fsync()  # the tree a note names must survive the crash the note does
        write_atomic(self.folder / NOTE_FILE, signed.render().encode())
        (self.folder / COSIGNATURES_FILE).unlink(missing_ok=True)

    def served(self) -> str:
        """The latest note with every cosignature collected for it."""
        assert self.note is not None
        return self.note.with_signatures(self.cosignatures).render()

    # -- witnesses ------------------------------------------------------------------

    def add_cosignature(self, text: str, witness_key: str) -> int:
        """Keep a witness's cosignature of the current note; the number now held."""
        try:
            witness = note.parse_verifier(witness_key)
            given = note.parse(text)
        except note.NoteError as exc:
            raise BadRequest(f"the cosignature was not accepted: {exc}") from None
        if witness.kind != note.COSIGNATURE:
            raise BadRequest("the witness key must be a cosignature key (type 0x04)")
        if (witness.name, witness.hash) not in self.witnesses:
            refused = BadRequest(
                f"the witness key {witness.text()[:200]} is not one this hub's operator "
                "configured: the hub keeps cosignatures only from the verifier keys listed in "
                '[hub] witnesses in society.toml (`bullpen docs audit`, "Running a witness")'
            )
            refused.status = 403
            raise refused
        if self.note is None or given.text != self.note.text:
            refused = BadRequest(
                "the cosigned checkpoint is not the hub's current one; fetch "
                "/tlog/checkpoint again and cosign that"
            )
            refused.status = 409
            raise refused
        if not given.verify(witness):
            raise BadRequest(f"no cosignature in the note verifies with {witness.name}'s key")
        line = next(
            s for s in given.signatures if s.name == witness.name and s.hash == witness.hash
        )
        kept = [s for s in self.cosignatures if (s.name, s.hash) != (witness.name, witness.hash)]
        self.cosignatures = [*kept, line]  # its own older one replaced, one per witness
        state = {"text": self.note.text, "lines": [s.text() for s in self.cosignatures]}
        write_atomic(self.folder / COSIGNATURES_FILE, json.dumps(state).encode())
        return len(self.cosignatures)

    def _load_cosignatures(self) -> None:
        try:
            state = json.loads((self.folder / COSIGNATURES_FILE).read_text(encoding="utf-8"))
            assert self.note is not None and state["text"] == self.note.text
            lines = note.parse(self.note.text + "\n" + "".join(state["lines"])).signatures
        except (OSError, ValueError, KeyError, TypeError, AssertionError):
            return  # none, or for an older note: witnesses cosign the current one again
        self.cosignatures = [s for s in lines if (s.name, s.hash) in self.witnesses]


@dataclass(frozen=True)
class Opened:
    tlog: TransparencyLog
    problem: str | None = None  # why the hub must not start on this room
    rebuilt: bool = False


async def open_tlog(
    room: Path,
    room_log: RoomLog,
    key: Ed25519PrivateKey,
    origin: str,
    keyed: Callable[[], dict[str, Any]],
    floor: int = 0,
    witnesses: Sequence[note.Verifier] = (),
) -> Opened:
    """Open (or rebuild) the tree for the room the log opened, and check it.

    `floor` is what the hub's older JSON checkpoint covers. Refused, with the
    reason in `problem`: a room whose lines no longer hash to the root the hub
    signed, and a verified line of a keyed nick with no sig beyond everything
    the hub signed — the hub never wrote one it did not cover first (checked
    before the tree takes any line, so that refusal leaves the tree as it was).
    """
    tree = Tree(tree_dir(room))
    tlog = TransparencyLog(room, tree, room_log, key, origin, witnesses)
    try:
        tlog.note = load_note(note_path(room), tlog.verifier)
    except note.NoteError as exc:
        log.warning("the checkpoint note does not verify; moved aside", detail=str(exc))
        os.replace(note_path(room), note_path(room).with_suffix(".unverified"))
    tlog._load_cosignatures()
    # First, before the tree takes any line: a refused start changes nothing beside the room.
    forged = await _first_unvouched(room_log, max(tlog.signed_size, floor), keyed())
    if forged is not None:
        seq, nick = forged
        return Opened(
            tlog,
            f"line {seq} says {nick} posted it verified with no sig, but {nick} proves with its "
            "own key, and no checkpoint the hub signed covers that line: the hub covers every "
            "such line before it answers, so this one was appended behind its back",
        )
    head = room_log.head.seq
    signed = tlog.signed_size
    intact = tree.size <= head and (
        not tree.size or (await _agrees(tree, room_log) and tree.levels_agree())
    )
    vouched = intact and tree.size >= signed and tree.root(signed) == tlog.signed_root
    if tlog.note is not None and not vouched:
        # The files cannot vouch for the room: check the room against the note itself, and
        # refuse before the tree changes (its files are what lets an audit locate a rewrite).
        problem = await _room_against(room_log, tlog.note.head(), note_path(room))
        if problem is not None:
            return Opened(tlog, problem)
    rebuilt = False
    if tree.size > head:
        tree.truncate(head)
        intact = not tree.size or (await _agrees(tree, room_log) and tree.levels_agree())
    if tree.size and not intact:
        tree.truncate(0)  # derived data that disagrees with the room or itself: make it again
        rebuilt = True
    elif head and not tree.size:
        rebuilt = True  # none yet (or deleted): built from the room now
    await tlog.catch_up()
    stale = tlog.note is not None and not rebuilt and signed <= tree.size
    if stale and tree.root(signed) != tlog.signed_root:
        tree.truncate(0)  # the files, or the room? rebuilt from the room, the check says which
        rebuilt = True
        await tlog.catch_up()
    if signed > tree.size:
        return Opened(tlog, _cut_off(tree.size, signed, note_path(room)), rebuilt)
    if tlog.note is not None and tree.root(signed) != tlog.signed_root:
        return Opened(tlog, _rewritten(signed, note_path(room)), rebuilt)
    return Opened(tlog, None, rebuilt)


def _cut_off(ends: int, signed: int, path: Path) -> str:
    return (
        f"the room ends at seq {ends}, but the hub's signed tree note {path} holds {signed} "
        "lines: lines were cut off"
    )


def _rewritten(signed: int, path: Path) -> str:
    return (
        f"the room's first {signed} lines do not hash to the root the hub signed in {path}: "
        f"a line below seq {signed} was changed, dropped or inserted"
    )


async def _room_against(room_log: RoomLog, head: note.TreeHead, path: Path) -> str | None:
    """Why the room's first `head.size` lines are not the tree the note signed (None: they
    are), folded as they stream past: nothing is written."""
    folding = merkle.Folding(head.size)
    after = 0
    while after < head.size:
        result = await room_log.read(after, PAGE, Filter())
        taken = after
        for raw in result.lines:
            seq = seq_of(raw)
            while after + 1 < seq and after < head.size:  # a line /read skips: its bytes
                missing = await room_log.line_at(after + 1)
                if missing is None:
                    break
                folding.add(missing)
                after += 1
            if seq == after + 1 and after < head.size:
                folding.add(raw)
                after += 1
        if after == taken:  # nothing /read gives: the next line's bytes as they are, or the end
            missing = await room_log.line_at(after + 1)
            if missing is None:
                return _cut_off(after, head.size, path)
            folding.add(missing)
            after += 1
    return None if folding.root() == head.root else _rewritten(head.size, path)


async def _agrees(tree: Tree, room_log: RoomLog) -> bool:
    """Whether the tree's last leaf is the room's line there."""
    raw = await room_log.line_at(tree.size)
    return raw is not None and merkle.leaf_hash(raw) == tree.leaf(tree.size - 1)


async def _first_unvouched(
    room_log: RoomLog, floor: int, keyed: dict[str, Any]
) -> tuple[int, str] | None:
    if not keyed:
        return None
    after = floor
    while after < room_log.head.seq:
        result = await room_log.read(after, PAGE, Filter(verified=True))
        for raw in result.lines:
            nick = keyed_unsigned(raw, keyed)
            if nick is not None:
                return seq_of(raw), nick
        if result.last_seq <= after:
            break
        after = result.last_seq
    return None

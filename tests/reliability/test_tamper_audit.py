"""Suite 5: tampering with a room, and what `bullpen audit` can and cannot see.

A room of 60 lines is written by the real log (some lines signed with a
nick's own Ed25519 key) and a checkpoint of its last line is signed with a
hub key. Each mutation kind is applied 1,000 times at random places:

- bit flip: one bit of one line (its newline included);
- deleted line; swapped lines; duplicated line (a copy put anywhere);
- forged inserted line: the strongest forger without the hub's key, who
  gives it the seq of its place and the hash of the line before.

"The first bad seq" is the position of the first line that differs from the
original. With the checkpoint, every mutation must be found and named
exactly. Without it, the chain must find and name every mutation whose first
bad line is before the last line; at the tail the figures are measured and
documented (docs/reliability.md), because a cut tail or an edited last line
looks like a shorter or different room and only a checkpoint can tell.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from room import strictjson
from room.chain import GENESIS, line_hash, split_lines
from room.jsonl import JsonlLog
from room.log import Draft
from room.message import Post, Signature
from room.tlog import note_path
from tests.reliability.helpers import Seeded, figures, whole_lines
from tests.support import HTTP, Society, run_cli, wait_for
from trust import checkpoint, keys, note
from trust.audit import AuditResult, audit_file
from trust.proof import proof_bytes

LINES = 60
Mutation = Callable[[list[bytes], Seeded], list[bytes]]


def signed_post(key: Ed25519PrivateKey, n: int) -> Post:
    post = Post.model_validate(
        {"from": "alice", "to": "@bob", "type": "chat", "body": f"signed {n}", "data": {"n": n}}
    )
    ts, nonce = 1_800_000_000 + n, f"nonce-{n:08d}"
    value = keys.sign(key, proof_bytes(post.signed_fields(), ts, nonce))
    return post.model_copy(update={"sig": Signature(ts=ts, nonce=nonce, value=value)})


def build_room(path: Path, key: Ed25519PrivateKey) -> list[bytes]:
    async def write() -> None:
        log = JsonlLog(path)
        await log.open()
        for n in range(LINES):
            if n % 3 == 0:
                post = signed_post(key, n)
            else:
                body = f"message {n} " + "é\u2028日" * (n % 4)
                post = Post.model_validate(
                    {"from": "operator", "to": "@echo", "type": "ask", "body": body}
                )
            await log.append(Draft(post, verified=True))
        await log.close()

    asyncio.run(write())
    lines, rest = split_lines(path.read_bytes())
    assert len(lines) == LINES and rest == b""
    return lines


def forged(lines: list[bytes], at: int, rng: Seeded) -> bytes:
    """A line a forger would insert at index `at`: plausible, and chained when crafted."""
    template = json.loads(lines[rng.randrange(len(lines))])
    template["body"] = "forged " + str(rng.randrange(10**6))
    template["sig"] = None
    template["verified"] = True
    if rng.random() < 0.8:  # crafted: its place's seq, chained to the line before
        template["seq"] = at + 1
        template["prev"] = GENESIS if at == 0 else line_hash(lines[at - 1])
    else:  # naive
        template["seq"] = rng.randint(1, len(lines) + 1)
        template["prev"] = hashlib.sha256(rng.randbytes(8)).hexdigest()
    return strictjson.dumps(template).encode()


def flip(lines: list[bytes], rng: Seeded) -> list[bytes]:
    blob = bytearray(b"".join(line + b"\n" for line in lines))
    i = rng.randrange(len(lines))
    start = sum(len(line) + 1 for line in lines[:i])
    pos = start + rng.randrange(len(lines[i]) + 1)  # its newline too
    blob[pos] ^= 1 << rng.randrange(8)
    mutated, rest = split_lines(bytes(blob))
    return mutated + ([rest] if rest else [])


def delete(lines: list[bytes], rng: Seeded) -> list[bytes]:
    i = rng.randrange(len(lines))
    return lines[:i] + lines[i + 1 :]


def swap(lines: list[bytes], rng: Seeded) -> list[bytes]:
    i, j = sorted(rng.sample(range(len(lines)), 2))
    out = list(lines)
    out[i], out[j] = out[j], out[i]
    return out


def duplicate(lines: list[bytes], rng: Seeded) -> list[bytes]:
    j, at = rng.randrange(len(lines)), rng.randrange(len(lines) + 1)
    return [*lines[:at], lines[j], *lines[at:]]


def insert(lines: list[bytes], rng: Seeded) -> list[bytes]:
    at = rng.randrange(len(lines))  # before an existing line; appending is its own case
    return [*lines[:at], forged(lines, at, rng), *lines[at:]]


MUTATIONS: dict[str, Mutation] = {
    "bit flip": flip,
    "deleted line": delete,
    "swapped lines": swap,
    "duplicated line": duplicate,
    "forged inserted line": insert,
}


def first_difference(original: list[bytes], mutated: list[bytes]) -> int:
    """The 1-based position of the first line that differs (a missing line counts)."""
    for index, (a, b) in enumerate(zip(original, mutated, strict=False)):
        if a != b:
            return index + 1
    return min(len(original), len(mutated)) + 1


@pytest.fixture(scope="module")
def room(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[list[bytes], dict, checkpoint.Checkpoint, Path]:
    path = tmp_path_factory.mktemp("tamper") / "room.jsonl"
    alice = Ed25519PrivateKey.generate()
    lines = build_room(path, alice)
    hub = Ed25519PrivateKey.generate()
    mark = checkpoint.make(hub, LINES, line_hash(lines[-1]))
    return lines, {"alice": alice.public_key()}, mark, path.parent


def audit_bytes(
    work: Path, lines: list[bytes], public: dict, mark: checkpoint.Checkpoint | None
) -> AuditResult:
    path = work / "mutated.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return audit_file(path, public, mark)


@pytest.mark.soak
@pytest.mark.parametrize("kind", list(MUTATIONS))
def test_every_mutation_is_detected_and_named(
    kind: str, room: tuple[list[bytes], dict, checkpoint.Checkpoint, Path], soak: bool, rng: Seeded
) -> None:
    """1,000 random mutations of one kind: all found and the first bad seq named, with a checkpoint and, before the last line, without."""
    lines, public, mark, work = room
    assert audit_bytes(work, lines, public, mark).ok
    count = 5000 if soak else 1000
    stats: Counter[str] = Counter()
    started = time.monotonic()
    for n in range(count):
        mutated = MUTATIONS[kind](lines, rng)
        if mutated == lines:
            continue  # cannot happen for these kinds, but never count a no-op
        where = f"{kind} #{n}, seed {rng.seed_value}"
        bad = first_difference(lines, mutated)
        with_mark = audit_bytes(work, mutated, public, mark)
        assert not with_mark.ok, f"undetected even with a checkpoint ({where})"
        assert with_mark.bad_seq == bad, (
            f"named seq {with_mark.bad_seq}, first bad line is {bad}: {with_mark.reason} ({where})"
        )
        stats["mutations"] += 1
        alone = audit_bytes(work, mutated, public, None)
        if bad < LINES:
            assert not alone.ok, f"the chain missed a mutation at seq {bad} ({where})"
            assert alone.bad_seq == bad, (
                f"named seq {alone.bad_seq}, first bad line is {bad}: {alone.reason} ({where})"
            )
        else:
            stats["at the tail"] += 1
            stats["at the tail, found without a checkpoint"] += not alone.ok
    figures(f"tamper {kind}", seconds=round(time.monotonic() - started, 1), **stats)


def test_cut_tail_and_rewrite_need_a_checkpoint(
    room: tuple[list[bytes], dict, checkpoint.Checkpoint, Path], rng: Seeded
) -> None:
    """A cut tail or a room rewritten with a fresh chain passes the chain alone; a newer checkpoint catches both."""
    lines, public, mark, work = room
    for cut in range(1, LINES):
        kept = lines[: LINES - cut]
        assert audit_bytes(work, kept, public, None).ok  # the chain cannot see a cut
        result = audit_bytes(work, kept, public, mark)
        assert (
            not result.ok
            and result.bad_seq == LINES - cut + 1
            and "cut off" in (result.reason or "")
        )
    for _ in range(200):
        at = rng.randrange(LINES)
        rewritten = rechain(lines, at, rng)
        signed = json.loads(lines[at])["sig"] is not None
        alone = audit_bytes(work, rewritten, public, None)
        if signed:  # authorship: the nick's signature no longer verifies
            assert not alone.ok and alone.bad_seq == at + 1 and "signature" in (alone.reason or "")
        else:
            assert alone.ok  # a fresh chain is self-consistent
        result = audit_bytes(work, rewritten, public, mark)
        assert not result.ok
        assert result.bad_seq == (at + 1 if signed else LINES)  # the checkpoint only knows its head


def rechain(lines: list[bytes], at: int, rng: Seeded) -> list[bytes]:
    """Edit line `at` and recompute every later prev: a rewrite from that point on."""
    out = list(lines[:at])
    prev = GENESIS if at == 0 else line_hash(lines[at - 1])
    for index in range(at, len(lines)):
        obj = json.loads(lines[index])
        if index == at:
            obj["body"] += f" (edited {rng.randrange(1000)})"
        obj["prev"] = prev
        raw = strictjson.dumps(obj).encode()
        out.append(raw)
        prev = line_hash(raw)
    return out


def test_forged_line_appended_after_the_checkpoint(
    room: tuple[list[bytes], dict, checkpoint.Checkpoint, Path], rng: Seeded
) -> None:
    """A chained line appended after the last checkpoint is invisible, unless it claims a nick with its own key."""
    lines, public, mark, work = room
    plain = forged(lines, LINES, rng)
    obj = json.loads(plain)
    obj.update(seq=LINES + 1, prev=line_hash(lines[-1]))
    reused = audit_bytes(work, [*lines, strictjson.dumps(obj).encode()], public, mark)
    assert not reused.ok and "already used" in (reused.reason or "")  # a copied id shows
    obj["id"] = "01" + "Z" * 24  # a careful forger mints a fresh one
    appended = [*lines, strictjson.dumps(obj).encode()]
    assert audit_bytes(work, appended, public, mark).ok  # documented: nothing can see it
    obj.update({"from": "alice", "sig": {"ts": 1, "nonce": "abcdefgh", "value": "AAAA"}})
    claimed = [*lines, strictjson.dumps(obj).encode()]
    result = audit_bytes(work, claimed, public, mark)
    assert not result.ok and result.bad_seq == LINES + 1 and "signature" in (result.reason or "")


def test_cli_names_the_first_bad_seq(
    room: tuple[list[bytes], dict, checkpoint.Checkpoint, Path], tmp_path: Path, rng: Seeded
) -> None:
    """`bullpen audit --checkpoint FILE` prints FAILED at the first bad seq and exits 1."""
    lines, _, mark, _ = room
    mark_file = tmp_path / "room.jsonl.checkpoint"
    checkpoint.write(mark_file, mark)
    room_file = tmp_path / "room.jsonl"
    room_file.write_bytes(b"".join(line + b"\n" for line in lines))
    done = run_cli(tmp_path / "no-home", "audit", str(room_file), "--checkpoint", str(mark_file))
    assert done.returncode == 0 and done.stdout.strip() == f"ok: {LINES} lines", done.stderr
    for kind in ("bit flip", "deleted line", "forged inserted line"):
        mutated = MUTATIONS[kind](lines, rng)
        room_file.write_bytes(b"".join(line + b"\n" for line in mutated))
        bad = first_difference(lines, mutated)
        done = run_cli(
            tmp_path / "no-home", "audit", str(room_file), "--checkpoint", str(mark_file)
        )
        assert done.returncode == 1 and f"FAILED at seq {bad}:" in done.stdout, (kind, done.stdout)
    # a checkpoint that is not the hub's is an audit failure; one that is not there, a usage error
    room_file.write_bytes(b"".join(line + b"\n" for line in lines))
    forged = json.loads(mark_file.read_text()) | {"seq": mark.seq - 1}
    mark_file.write_text(json.dumps(forged))
    done = run_cli(tmp_path / "no-home", "audit", str(room_file), "--checkpoint", str(mark_file))
    assert done.returncode == 1 and "not signed by the hub" in done.stderr, done.stderr
    missing = str(tmp_path / "nowhere.checkpoint")
    done = run_cli(tmp_path / "no-home", "audit", str(room_file), "--checkpoint", missing)
    assert done.returncode == 2 and "--checkpoint" in done.stderr, done.stderr


def test_hub_checkpoints_on_a_schedule_and_audit_uses_them(society: Society, rng: Seeded) -> None:
    """A running hub signs checkpoints on its schedule; after a SIGKILL they still catch a cut tail and a rewrite."""
    society_file = society.root / "society.toml"
    text = society_file.read_text()
    society_file.write_text(
        re.sub(r"checkpoint_interval_s = \S+", "checkpoint_interval_s = 0.2", text)
    )
    hub = society.start_hub()
    for n in range(12):
        answer = HTTP.post(
            f"{society.strict_url}/say",
            json={"from": "w", "to": "@sink", "type": "chat", "body": f"line {n}"},
            timeout=10,
        )
        assert answer.status_code == 200
    mark_file = society.room.with_name("room.jsonl.checkpoint")
    tree_note = note_path(society.room)

    def marked() -> bool:  # both: the audit locates a rewrite by the tree the note signed
        return (
            mark_file.exists()
            and json.loads(mark_file.read_text())["seq"] == 12
            and tree_note.exists()
            and note.parse(tree_note.read_text()).head().size == 12
        )

    wait_for(marked, 10, "a scheduled checkpoint and tree note of seq 12")
    hub.kill()  # no shutdown checkpoint: the scheduled one is all there is
    done = run_cli(society.root, "audit")
    assert done.returncode == 0 and "checkpoint: seq 12 matches" in done.stderr, done.stderr
    lines = whole_lines(society.room)
    society.room.write_bytes(b"".join(line + b"\n" for line in lines[:-3]))
    done = run_cli(society.root, "audit")
    assert done.returncode == 1 and "FAILED at seq 10:" in done.stdout and "cut off" in done.stdout
    society.room.write_bytes(b"".join(line + b"\n" for line in rechain(lines, 4, rng)))
    done = run_cli(society.root, "audit")
    # the hub's tree (docs/audit.md) names where the rewrite began, not only the checkpoint's seq
    assert done.returncode == 1 and "FAILED at seq 5:" in done.stdout, done.stdout
    assert "not the one the hub's signed tree holds" in done.stdout
    # A checkpoint signed by any other key is refused, whatever it says.
    society.room.write_bytes(b"".join(line + b"\n" for line in lines))
    forged_mark = checkpoint.make(Ed25519PrivateKey.generate(), 12, line_hash(lines[-1]))
    checkpoint.write(mark_file, forged_mark)
    done = run_cli(society.root, "audit")
    assert done.returncode != 0 and "not signed by the hub's key" in done.stdout + done.stderr

"""A changed byte, a truncated room, a line dropped or inserted, a forked history: each caught.

A real hub (each engine) writes the room and signs its tree; then the room
is tampered with as someone holding the file (or an export of the stream)
would, including the strongest forger without the hub's key, who rewrites
the chain after the change so that every `prev` matches again. `bullpen
audit` and `bullpen verify` must fail, naming the seq where there is one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from room import strictjson
from room.chain import GENESIS, line_hash
from room.tlog import note_path
from room.tree import Tree, tree_dir
from tests.conftest import ENGINES
from tests.support import Society, run_cli, society_on
from tests.tlog.helpers import checkpoint_of, fill, prepare
from trust import note
from trust.audit import AuditResult, audit_file

LINES = 40


@pytest.fixture(scope="module", params=ENGINES)
def signed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Society]:
    """A stopped hub's room of LINES lines, its tree and the note signing all of them."""
    society = society_on(
        request.param,
        tmp_path_factory.mktemp("tamper") / "home",
        lambda: request.getfixturevalue("nats_server"),
    )
    prepare(society)
    society.start_hub()
    try:
        fill(society, LINES)
        checkpoint_of(society, LINES)
    finally:
        society.stop_all()
    yield society


def _lines(society: Society) -> list[bytes]:
    return society.room.read_bytes().split(b"\n")[:-1]


def _rechain(lines: list[bytes]) -> list[bytes]:
    """Renumber and re-link every line, as a forger without the hub's key can."""
    out: list[bytes] = []
    prev = GENESIS
    for seq, raw in enumerate(lines, start=1):
        obj = json.loads(raw)
        obj["seq"], obj["prev"] = seq, prev
        line = strictjson.dumps(obj).encode()
        out.append(line)
        prev = line_hash(line)
    return out


def _edit(raw: bytes, old: bytes, new: bytes) -> bytes:
    assert old in raw
    return raw.replace(old, new, 1)


def _audit(society: Society, lines: list[bytes], tmp_path: Path) -> AuditResult:
    """Audit a tampered copy against the hub's signed note and its own tree files."""
    copy = tmp_path / "room.jsonl"
    copy.write_bytes(b"".join(line + b"\n" for line in lines))
    trust = society.home.trust
    text = note_path(society.home.room_path).read_text()
    head = note.parse(text).head()
    assert head.size == LINES
    stored = Tree(tree_dir(society.home.room_path), readonly=True)
    try:
        return audit_file(copy, trust.public_keys, None, head, stored)
    finally:
        stored.close()


def test_the_untouched_room_audits_clean(signed: Society, tmp_path: Path) -> None:
    """The hub's own room passes, and `bullpen audit` says the tree's root matched."""
    assert _audit(signed, _lines(signed), tmp_path).ok
    done = run_cli(signed.root, "audit")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"ok: {LINES} lines"
    assert f"tree: the first {LINES} lines hash to the root the hub signed" in done.stderr


@pytest.mark.parametrize("rechain", [False, True], ids=["as-is", "rechained"])
def test_a_changed_byte_is_named(signed: Society, tmp_path: Path, rechain: bool) -> None:
    """One byte of line 17's body changed: the audit fails at seq 17, chain rewritten or not."""
    lines = _lines(signed)
    lines[16] = _edit(lines[16], b"line 16 ", b"line 61 ")
    if rechain:
        lines = _rechain(lines)
    result = _audit(signed, lines, tmp_path)
    assert not result.ok and result.bad_seq == 17, result.summary()


def test_a_dropped_line_is_named(signed: Society, tmp_path: Path) -> None:
    """Line 9 removed and the rest renumbered and rechained: the audit fails at seq 9."""
    lines = _rechain(_lines(signed)[:8] + _lines(signed)[9:])
    result = _audit(signed, lines, tmp_path)
    assert not result.ok and result.bad_seq == 9, result.summary()


def test_an_inserted_line_is_named(signed: Society, tmp_path: Path) -> None:
    """A line slipped in at seq 25 and the rest rechained: the audit fails at seq 25."""
    lines = _lines(signed)
    forged = _edit(lines[23], b"line 23 ", b"forged! ")
    lines = _rechain([*lines[:24], forged, *lines[24:]])
    result = _audit(signed, lines, tmp_path)
    assert not result.ok and result.bad_seq == 25, result.summary()


def test_a_truncated_room_is_caught(signed: Society, tmp_path: Path) -> None:
    """The last three lines cut off: the audit fails at the first missing seq."""
    result = _audit(signed, _lines(signed)[:-3], tmp_path)
    assert not result.ok and result.bad_seq == LINES - 2, result.summary()
    assert "cut off" in (result.reason or "")


def test_verify_refuses_a_changed_line_and_a_short_room(signed: Society, tmp_path: Path) -> None:
    """`bullpen verify --room` with the signed note: a changed line and a cut room fail (exit 1)."""
    note_file = note_path(signed.home.room_path)
    good = tmp_path / "good.jsonl"
    good.write_bytes(b"".join(line + b"\n" for line in _lines(signed)))
    done = run_cli(
        signed.root, "verify", "--checkpoint", str(note_file), "--room", str(good), "--seq", "17"
    )
    assert done.returncode == 0 and "ok: line 17 is in the signed tree" in done.stdout, done.stderr
    changed = _lines(signed)
    changed[16] = _edit(changed[16], b"line 16 ", b"line 61 ")
    line = tmp_path / "line17.json"
    line.write_bytes(changed[16] + b"\n")
    done = run_cli(
        signed.root,
        "verify",
        "--checkpoint",
        str(note_file),
        "--room",
        str(good),
        "--line",
        str(line),
    )
    assert done.returncode == 1 and "is not line 17 of the signed tree" in done.stdout, done.stdout
    short = tmp_path / "short.jsonl"
    short.write_bytes(b"".join(line + b"\n" for line in _lines(signed)[:-3]))
    done = run_cli(
        signed.root, "verify", "--checkpoint", str(note_file), "--room", str(short), "--seq", "2"
    )
    assert done.returncode == 1 and "lines were cut off" in done.stdout, done.stdout


def test_a_forked_history_is_caught(
    signed: Society, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A second room signed with the same key and origin (a hub showing another history):
    its checkpoint verifies alone, but not as an extension of the first one."""
    old_note = tmp_path / "old.note"
    old_note.write_text(note_path(signed.home.room_path).read_text())
    fork = Society(tmp_path / "fork")  # a JSONL room, whatever engine the original used
    prepare(fork)
    shutil.copy(signed.home.trust.hub_key_file, fork.home.trust.hub_key_file)
    trust = fork.root / "trust.toml"
    public = signed.home.trust.hub_public_text
    trust.write_text(
        "\n".join(
            f'hub_public_key = "{public}"' if row.startswith("hub_public_key") else row
            for row in trust.read_text().splitlines()
        )
        + "\n"
    )
    origin = note.parse(old_note.read_text()).head().origin
    from tests.support import set_hub

    set_hub(fork.root, tlog_origin=origin)
    fork.start_hub()
    try:
        fill(fork, LINES // 2)  # the same count of lines at first, then more: other bytes
        fill(fork, LINES)
        new_text = checkpoint_of(fork, LINES + LINES // 2)
    finally:
        fork.stop_all()
    new_note = tmp_path / "new.note"
    new_note.write_text(new_text)
    printed = run_cli(signed.root, "trust", "verifier-key")
    assert printed.returncode == 0, printed.stderr
    key = printed.stdout.strip()
    assert key.startswith(origin + "+"), key
    alone = run_cli(
        fork.root, "verify", "--key", key, "--checkpoint", str(new_note), "--room", str(fork.room)
    )
    assert alone.returncode == 0, alone.stdout + alone.stderr
    forked = run_cli(
        fork.root,
        "verify",
        "--key",
        key,
        "--checkpoint",
        str(new_note),
        "--since",
        str(old_note),
        "--room",
        str(fork.room),
    )
    assert forked.returncode == 1, forked.stdout + forked.stderr
    assert f"does not extend the tree of {LINES}" in forked.stdout and "fork" in forked.stdout

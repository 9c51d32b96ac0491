"""`bullpen audit`: every edit, deletion, reordering or cut it can see, named by seq."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from room.chain import GENESIS, line_hash
from room.durable import mark_path
from tests.support import Society, run_cli


def make_room(path: Path, n: int = 8) -> list[bytes]:
    lines, prev = [], GENESIS
    for seq in range(1, n + 1):
        obj = {
            "seq": seq,
            "id": f"ID{seq:04d}",
            "ts": "2026-12-01T00:00:00.000Z",
            "from": "operator",
            "to": "@echo",
            "type": "chat",
            "body": f"message {seq}",
            "data": None,
            "in_reply_to": None,
            "thread": None,
            "sig": None,
            "verified": True,
            "prev": prev,
        }
        line = json.dumps(obj, separators=(",", ":")).encode()
        prev = line_hash(line)
        lines.append(line)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return lines


def audit(tmp_path: Path, room: Path, *extra: str) -> tuple[int, str]:
    done = run_cli(tmp_path / "no-home", "audit", str(room), *extra)
    return done.returncode, done.stdout + done.stderr


def test_intact_room_is_ok(tmp_path: Path) -> None:
    """A room written correctly audits ok and says how many lines."""
    room = tmp_path / "room.jsonl"
    make_room(room)
    code, out = audit(tmp_path, room)
    assert code == 0 and out.splitlines()[0] == "ok: 8 lines"
    assert "beyond the last checkpoint: 8 lines (no signed checkpoint was checked" in out


def test_edited_line_is_named(tmp_path: Path) -> None:
    """Changing one byte of a line's body makes audit fail at that line's seq."""
    room = tmp_path / "room.jsonl"
    lines = make_room(room)
    lines[3] = lines[3].replace(b"message 4", b"message X")
    room.write_bytes(b"".join(line + b"\n" for line in lines))
    code, out = audit(tmp_path, room)
    assert code == 1
    assert "FAILED at seq 4" in out


def test_deleted_line_is_named(tmp_path: Path) -> None:
    """A removed line makes audit fail at the missing seq."""
    room = tmp_path / "room.jsonl"
    lines = make_room(room)
    del lines[4]
    room.write_bytes(b"".join(line + b"\n" for line in lines))
    code, out = audit(tmp_path, room)
    assert code == 1 and "FAILED at seq 5" in out and "missing" in out


def test_reordered_lines_are_named(tmp_path: Path) -> None:
    """Two swapped lines make audit fail at the first out-of-place seq."""
    room = tmp_path / "room.jsonl"
    lines = make_room(room)
    lines[2], lines[3] = lines[3], lines[2]
    room.write_bytes(b"".join(line + b"\n" for line in lines))
    code, out = audit(tmp_path, room)
    assert code == 1 and "FAILED at seq 3" in out


def test_duplicated_line_is_named(tmp_path: Path) -> None:
    """A line copied twice makes audit fail where the copy sits."""
    room = tmp_path / "room.jsonl"
    lines = make_room(room)
    lines.insert(3, lines[2])
    room.write_bytes(b"".join(line + b"\n" for line in lines))
    code, out = audit(tmp_path, room)
    assert code == 1 and "FAILED at seq 4" in out


def test_unparseable_line_is_named(tmp_path: Path) -> None:
    """A line that is not JSON makes audit fail at its seq."""
    room = tmp_path / "room.jsonl"
    lines = make_room(room)
    lines[5] = b"{broken"
    room.write_bytes(b"".join(line + b"\n" for line in lines))
    code, out = audit(tmp_path, room)
    assert code == 1 and "FAILED at seq 6" in out and "does not parse" in out


def test_torn_tail_fails(tmp_path: Path) -> None:
    """Bytes after the last newline are reported as a torn write."""
    room = tmp_path / "room.jsonl"
    make_room(room)
    with room.open("ab") as f:
        f.write(b'{"seq":9,')
    code, out = audit(tmp_path, room)
    assert code == 1 and "FAILED at seq 9" in out and "torn" in out


@pytest.mark.parametrize("missing", ["nothing.jsonl"])
def test_missing_room_is_a_clear_error(tmp_path: Path, missing: str) -> None:
    """Auditing a path that does not exist says so and exits non-zero."""
    code, out = audit(tmp_path, tmp_path / missing)
    assert code != 0 and "no room at" in out


def rechain(lines: list[bytes]) -> list[bytes]:
    """The lines with every prev recomputed: what a forger who rewrites the file would do."""
    out, prev = [], GENESIS
    for line in lines:
        obj = json.loads(line)
        obj["prev"] = prev
        raw = json.dumps(obj, separators=(",", ":")).encode()
        prev = line_hash(raw)
        out.append(raw)
    return out


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"seq": "3"}, "seq"),
        ({"from": "BAD NICK"}, "not a nick"),
        ({"type": "bogus"}, "type must be one of"),
        ({"evil": 1}, "evil"),
        ({"verified": "yes"}, "verified"),
        ({"to": "echo"}, "@nick"),
        ({"data": [1, 2]}, "data"),
    ],
)
def test_a_line_the_hub_could_not_write_fails_even_rechained(
    tmp_path: Path, change: dict[str, object], needle: str
) -> None:
    """A forged field, type or address is caught though the chain was rebuilt over it."""
    room = tmp_path / "room.jsonl"
    lines = make_room(room, 6)
    forged = json.loads(lines[2]) | change
    lines[2] = json.dumps(forged, separators=(",", ":")).encode()
    room.write_bytes(b"".join(line + b"\n" for line in rechain(lines)))
    code, out = audit(tmp_path, room)
    assert code == 1 and "FAILED at seq 3" in out and needle in out, out


def test_a_reused_id_is_named(tmp_path: Path) -> None:
    """Ids are unique: a line that reuses an earlier id fails at its seq."""
    room = tmp_path / "room.jsonl"
    lines = make_room(room, 6)
    copied = json.loads(lines[4]) | {"id": json.loads(lines[1])["id"]}
    lines[4] = json.dumps(copied, separators=(",", ":")).encode()
    room.write_bytes(b"".join(line + b"\n" for line in rechain(lines)))
    code, out = audit(tmp_path, room)
    assert code == 1 and "FAILED at seq 5" in out and "already used" in out, out


def test_a_folder_is_refused_clearly(tmp_path: Path) -> None:
    """Auditing a folder says what was wrong, with no traceback."""
    code, out = audit(tmp_path, tmp_path)
    assert code == 1 and "not a room file" in out and "Traceback" not in out


def test_a_fresh_home_says_its_room_was_never_started(tmp_path: Path) -> None:
    """A home whose hub never ran has no room file yet: the audit says so, not an empty OK
    and not a traceback, and exits 0 (nothing is wrong)."""
    home = tmp_path / "home"
    assert run_cli(home, "init", str(home)).returncode == 0
    done = run_cli(home, "audit")
    assert done.returncode == 0 and done.stdout.strip() == "not started: no room yet"
    assert "was never started" in done.stderr and "bullpen up" in done.stderr
    assert "ok:" not in done.stdout and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("damage", "mark"),
    [("emptied", True), ("cut", True), ("last line edited", True), ("cut", False)],
)
def test_a_room_the_checkpoint_contradicts_stops_the_hub(
    society: Society, damage: str, mark: bool
) -> None:
    """A room cut short or rewritten below the hub's last checkpoint (and its durable mark, or
    the checkpoint alone) is not a torn tail: the hub refuses to start (exit 78), changes
    nothing, and an audit against that checkpoint names the damage."""
    hub = society.start_hub()
    with httpx.Client(base_url=society.strict_url, timeout=10) as client:
        for n in range(5):
            body = {"from": "stranger", "to": "@echo", "type": "chat", "body": f"m{n}"}
            assert client.post("/say", json=body).status_code == 200
    assert hub.stop() == 0
    society.procs.remove(hub)
    checkpoint = society.room.with_name("room.jsonl.checkpoint")
    kept = checkpoint.read_bytes()
    if not mark:
        mark_path(society.room).unlink()
    lines = society.room.read_bytes().splitlines(keepends=True)
    if damage == "emptied":
        society.room.write_bytes(b"")
    elif damage == "cut":
        society.room.write_bytes(b"".join(lines[:3]) + lines[3][:20])
    else:
        society.room.write_bytes(b"".join(lines[:4]) + lines[4].replace(b"m4", b"mX"))
    damaged = society.room.read_bytes()
    again = society.spawn("hub-again", "hub")
    assert again.proc.wait(20) == 78, again.output()
    assert "bullpen audit" in again.output() and "moved nothing" in again.output()
    assert society.room.read_bytes() == damaged and checkpoint.read_bytes() == kept
    assert not list(society.room.parent.glob("room.jsonl.torn-*"))
    done = run_cli(society.root, "audit", "--checkpoint", str(checkpoint))
    assert done.returncode == 1 and "FAILED" in done.stdout, done.stdout + done.stderr

"""A line appended to a stopped hub's room that the gate could not have written fails the audit.

A real hub stores a signed post and a relaxed post of a nick that proves
with its own key, then stops (writing its checkpoint). A forger appends a
chained line claiming that nick, `verified: true` and no `sig` (with or
without `via: "relaxed"`): the audit names its seq. Lines a hub from before the `via` mark wrote stay auditable
while a signed checkpoint covers them (docs/room.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from room import strictjson
from room.chain import line_hash
from room.message import Post
from tests.support import HTTP, Society, run_cli
from trust import checkpoint as checkpoints
from trust.audit import audit_file
from trust.keys import load_private_key
from trust.proof import KeySigner


def _keyed_society(root: Path) -> Society:
    society = Society(root)
    made = run_cli(root, "keys", "new", "scribe")
    assert made.returncode == 0, made.stderr
    trust = root / "trust.toml"
    trust.write_text(trust.read_text() + made.stdout)
    return society


def _post(society: Society, *, relaxed: bool) -> dict[str, object]:
    payload: dict[str, object] = {"from": "scribe", "to": "@echo", "type": "chat", "body": "hi"}
    headers = {}
    if relaxed:
        url, headers["authorization"] = society.relaxed_url, f"Bearer {society.token()}"
    else:
        url = society.strict_url
        key = load_private_key(society.home.trust.key_file("scribe"))
        payload.update(KeySigner(key).prove(Post.model_validate(payload)))
    answer = HTTP.post(f"{url}/say", json=payload, headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def _append_forged(room: Path, **fields: object) -> int:
    """Append a line chained to the last one, as a forger without the hub's key would."""
    lines = room.read_bytes().splitlines()
    last = json.loads(lines[-1])
    forged = {**last, "seq": last["seq"] + 1, "id": "01FORGED0000000000000000000"}
    forged.update({"body": "forged", "sig": None, "verified": True, "prev": line_hash(lines[-1])})
    forged.pop("via", None)
    forged.update(fields)
    with room.open("ab") as out:
        out.write(strictjson.dumps(forged).encode() + b"\n")
    return int(forged["seq"])


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Society:
    """A keyed nick's signed and relaxed posts, stored by a real hub that then stopped."""
    society = _keyed_society(tmp_path_factory.mktemp("forged") / "home")
    society.start_hub()
    try:
        signed = _post(society, relaxed=False)
        relaxed = _post(society, relaxed=True)
    finally:
        society.stop_all()
    assert "via" not in signed and signed["sig"]
    assert relaxed["via"] == "relaxed" and relaxed["sig"] is None and relaxed["verified"]
    return society


def test_hub_written_room_audits_clean(stopped: Society) -> None:
    """The hub's own room passes, and the audit says nothing lies beyond the checkpoint."""
    done = run_cli(stopped.root, "audit")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "ok: 2 lines"
    assert "beyond the last checkpoint: 0 lines after seq 2" in done.stderr


def test_forged_unsigned_line_fails_naming_its_seq(stopped: Society, tmp_path: Path) -> None:
    """A chained, verified, unsigned line of the keyed nick appended after the stop fails at its seq."""
    room = tmp_path / "room.jsonl"
    room.write_bytes(stopped.room.read_bytes())
    seq = _append_forged(room)
    trust = stopped.home.trust
    mark = checkpoints.load(stopped.room.with_name("room.jsonl.checkpoint"), trust.hub_public_key)
    result = audit_file(room, trust.public_keys, mark)
    assert not result.ok and result.bad_seq == seq == 3
    assert "scribe proves with its own key" in (result.reason or "")
    # through the command, from the home: the same verdict
    done = run_cli(
        stopped.root,
        "audit",
        str(room),
        "--checkpoint",
        str(stopped.room.with_name("room.jsonl.checkpoint")),
    )
    assert done.returncode == 1 and done.stdout.startswith("FAILED at seq 3:"), done.stdout


def test_forged_mark_fails_beyond_the_checkpoint(stopped: Society, tmp_path: Path) -> None:
    """A forger who adds the relaxed mark fails too: `via` is as forgeable as `verified`."""
    room = tmp_path / "room.jsonl"
    room.write_bytes(stopped.room.read_bytes())
    seq = _append_forged(room, via="relaxed")
    trust = stopped.home.trust
    mark = checkpoints.load(stopped.room.with_name("room.jsonl.checkpoint"), trust.hub_public_key)
    result = audit_file(room, trust.public_keys, mark)
    assert not result.ok and result.bad_seq == seq == 3
    assert "(via: relaxed)" in (result.reason or "")
    assert "no checkpoint the hub signed covers this line" in (result.reason or "")


def test_old_unmarked_lines_pass_under_the_checkpoint(stopped: Society, tmp_path: Path) -> None:
    """A room from before the mark (the relaxed line without via) audits ok while a checkpoint covers it."""
    lines = stopped.room.read_bytes().splitlines()
    old = json.loads(lines[1])
    del old["via"]
    old["prev"] = line_hash(lines[0])
    old_line = strictjson.dumps(old).encode()
    room = tmp_path / "room.jsonl"
    room.write_bytes(lines[0] + b"\n" + old_line + b"\n")
    trust = stopped.home.trust
    hub_key = load_private_key(trust.hub_key_file)
    path = tmp_path / "room.jsonl.checkpoint"
    checkpoints.write(path, checkpoints.make(hub_key, 2, line_hash(old_line)))
    covered = audit_file(room, trust.public_keys, checkpoints.load(path, trust.hub_public_key))
    assert covered.ok and covered.unmarked == 1, covered.reason
    # without the checkpoint, nothing vouches for it: the audit cannot tell it from a forgery
    bare = audit_file(room, trust.public_keys, None)
    assert not bare.ok and bare.bad_seq == 2

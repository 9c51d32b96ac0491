"""Issue 33, "the verifiable room, correct": what the hub, verify, witness and audit must not claim.

Each test drives the real processes (the hub, `bullpen verify`, `bullpen
witness`, `bullpen audit`) and failed before its fix:

- the hub's own key passed as `--witness` counted the hub's signature as a cosignature;
- anyone with the read token filled the hub's cosignature slots with made-up witnesses;
- a long-poll asking past the head returned the next line, far below `after`;
- a deleted room audited as "never started" beside a checkpoint of its lines;
- a refused start still moved the durable mark over the line it refused;
- a line was provable only after a minute (`checkpoint_interval_s = 60`);
- the JSON checkpoint could name a head the signed tree on disk did not hold;
- `verify --export --out` overwrote a file.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from room import durable
from room.service import checkpoint_file
from room.tlog import note_path
from room.tree import tree_dir
from tests.support import HTTP, Society, run_cli, set_hub, wait_for
from tests.tlog.helpers import checkpoint, checkpoint_of, fill, prepare
from trust import note


def _post(society: Society, body: str) -> dict[str, Any]:
    answer = HTTP.post(
        f"{society.strict_url}/say",
        json={"from": "visitor", "to": "@echo", "type": "chat", "body": body},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def _filled(tmp_path: Path, count: int) -> Society:
    """A running hub whose room holds `count` lines, all in its signed checkpoint."""
    society = Society(tmp_path / "home")
    prepare(society)
    society.start_hub()
    fill(society, count)
    checkpoint_of(society, count)
    return society


def test_the_hubs_own_key_is_never_a_witness(tmp_path: Path) -> None:
    """`verify --witness "$(bullpen trust verifier-key)"` is refused (exit 2), in either key type."""
    society = _filled(tmp_path, 3)
    try:
        own = run_cli(society.root, "trust", "verifier-key").stdout.strip()
        done = run_cli(society.root, "verify", "--witness", own)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "the hub's own key" in done.stderr and "signed by" not in done.stdout
        hub = note.parse_verifier(own)  # the same key dressed as a cosignature key (0x04)
        dressed = note.Verifier(hub.name, hub.public, note.COSIGNATURE).text()
        done = run_cli(society.root, "verify", "--witness", dressed)
        assert done.returncode == 2 and "the hub's own key" in done.stderr, done.stderr
        bundle = tmp_path / "line-2.json"
        made = run_cli(society.root, "verify", "--export", "2", "--out", str(bundle))
        assert made.returncode == 0, made.stdout + made.stderr
    finally:
        society.stop_all()
    checked = run_cli(tmp_path / "no-home", "verify", str(bundle), "--key", own, "--witness", own)
    assert checked.returncode == 2 and "the hub's own key" in checked.stderr, checked.stderr


def _cosign_request(text: str, name: str, key: Ed25519PrivateKey) -> dict[str, str]:
    signed = note.parse(text)
    line = note.cosign(signed.text, name, key, int(time.time()))
    return {
        "checkpoint": note.Note(signed.text, [line]).render(),
        "witness_key": note.verifier_of(name, key, note.COSIGNATURE).text(),
    }


def test_only_configured_witnesses_are_kept(tmp_path: Path) -> None:
    """Made-up witnesses get a 403 naming [hub] witnesses; the configured one is kept, once."""
    society = Society(tmp_path / "home")
    prepare(society)
    witness_args = ("witness", "--once", "--state", str(tmp_path / "state.json"))
    shown = run_cli(society.root, *witness_args, "--show-key", "--name", "witness/real")
    assert shown.returncode == 0, shown.stderr
    real = shown.stdout.strip()
    set_hub(society.root, witnesses=[real])
    society.start_hub()
    try:
        fill(society, 4)
        text = checkpoint_of(society, 4)
        for n in range(20):  # more than the 16 slots the hub once had
            made_up = _cosign_request(text, f"witness/fake{n}", Ed25519PrivateKey.generate())
            answer = HTTP.post(
                f"{society.strict_url}/tlog/cosign", json=made_up, headers=society.read_headers()
            )
            assert answer.status_code == 403, answer.text
            assert "[hub] witnesses" in answer.json()["message"]
        for _ in range(2):  # cosigned twice: its own older cosignature is replaced
            done = run_cli(society.root, *witness_args, "--name", "witness/real")
            assert done.returncode == 0, done.stdout + done.stderr
        served = note.parse(checkpoint(society))
        assert [s.name for s in served.signatures] == [served.head().origin, "witness/real"]
        ok = run_cli(society.root, "verify", "--witness", real)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert ok.stdout.startswith(f"ok: checkpoint {served.head().origin} of 4 lines, signed")
    finally:
        society.stop_all()
    origin = served.head().origin  # a hub-key "witness" in the config stops the hub
    hub_key = society.home.trust.hub_key_file
    from trust import keys

    own = note.verifier_of(origin, keys.load_private_key(hub_key), note.COSIGNATURE).text()
    set_hub(society.root, witnesses=[real, own])
    refused = society.spawn("hub-own-witness", "hub")
    assert refused.proc.wait(60) == 78, refused.output()
    assert "the hub's own key" in refused.output()


def test_a_long_poll_past_the_head_never_returns_a_line_at_or_below_after(tmp_path: Path) -> None:
    """`/read?after=10^9&wait=3` waits out its time though seq 2 is posted meanwhile."""
    society = Society(tmp_path / "home")
    society.start_hub()
    try:
        _post(society, "one")
        answers: list[httpx.Response] = []

        def poll() -> None:
            answers.append(
                HTTP.get(
                    f"{society.strict_url}/read",
                    params={"after": 1_000_000_000, "wait": 3},
                    headers=society.read_headers(),
                    timeout=20,
                )
            )

        began = time.monotonic()
        reader = threading.Thread(target=poll)
        reader.start()
        wait_for(
            lambda: (
                HTTP.get(f"{society.strict_url}/health", timeout=5).json()["readers_waiting"] == 1
            ),
            10,
            "the long-poll to wait",
        )
        assert _post(society, "two")["seq"] == 2
        reader.join(20)
        assert answers and answers[0].status_code == 200, answers
        assert answers[0].json()["messages"] == []
        assert time.monotonic() - began >= 2.5  # it waited out its time, not woken by seq 2
        later = HTTP.get(
            f"{society.strict_url}/read",
            params={"after": 1, "wait": 3},
            headers=society.read_headers(),
            timeout=20,
        )
        assert [m["seq"] for m in later.json()["messages"]] == [2]  # below the head it still reads
    finally:
        society.stop_all()


def _stopped_with_lines(tmp_path: Path, count: int) -> Society:
    society = _filled(tmp_path, count)
    society.stop_all()
    return society


def test_audit_fails_a_deleted_or_cut_room_beside_its_records(tmp_path: Path) -> None:
    """A missing room beside a checkpoint is not "never started"; a cut room fails by its mark."""
    society = _stopped_with_lines(tmp_path, 65)
    room = society.room
    whole = room.read_bytes()
    room.unlink()
    done = run_cli(society.root, "audit")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "never started" not in done.stdout + done.stderr
    assert "is missing" in done.stdout and "records 65 lines" in done.stdout, done.stdout
    # only the durable mark left beside a room cut to 60 lines: still a failure, saying which
    checkpoint_file(room).unlink()
    note_path(room).unlink()
    room.write_bytes(b"".join(line + b"\n" for line in whole.split(b"\n")[:60]))
    done = run_cli(society.root, "audit")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("FAILED at seq 61:") and "61-65 are missing" in done.stdout
    room.write_bytes(whole)  # whole again: it audits clean
    done = run_cli(society.root, "audit")
    assert done.returncode == 0, done.stdout + done.stderr
    room.unlink()  # and a home whose hub never wrote anything is still "not started"
    durable.mark_path(room).unlink()
    done = run_cli(society.root, "audit")
    assert done.returncode == 0 and "never started" in done.stderr, done.stdout + done.stderr


def test_a_refused_start_publishes_nothing(tmp_path: Path) -> None:
    """A keyed line appended behind the hub's back: the start is refused, and the durable mark,
    the checkpoints and the tree files are exactly as the last hub left them."""
    from tests.tlog.test_forged import _append, _forge, _keyed

    society = Society(tmp_path / "home")
    _keyed(society)
    society.start_hub()
    try:
        _post(society, "first")
    finally:
        society.stop_all()
    room = society.room
    before = _records(room)
    _append(society, _forge(society))
    hub = society.spawn("hub-again", "hub")
    assert hub.proc.wait(60) == 78, hub.output()
    assert "appended behind its back" in hub.output()
    assert _records(room) == before
    mark = durable.load(room)
    assert mark is not None and mark.seq == 1  # a file follower still stops before line 2


def _records(room: Path) -> dict[Path, bytes]:
    """Everything a hub keeps beside its room: the durable mark, checkpoints, tree files."""
    beside = [durable.mark_path(room), checkpoint_file(room), note_path(room)]
    beside = [p for p in beside if p.exists()]
    beside += sorted(p for p in tree_dir(room).iterdir() if p.name.startswith("level-"))
    return {p: p.read_bytes() for p in beside}


def test_a_start_refused_for_a_rewrite_keeps_the_tree_that_locates_it(tmp_path: Path) -> None:
    """A room rewritten below the signed tree: the start is refused without rebuilding the tree
    files from the rewritten room, so the audit still names the first rewritten seq."""
    from tests.reliability.helpers import Seeded
    from tests.reliability.test_tamper_audit import rechain

    society = _stopped_with_lines(tmp_path, 12)
    room = society.room
    before = _records(room)
    lines = [line for line in room.read_bytes().split(b"\n") if line]
    room.write_bytes(b"".join(line + b"\n" for line in rechain(lines, 4, Seeded(5))))
    for record in (checkpoint_file(room), durable.mark_path(room)):  # the tree note alone
        record.unlink()  # stands against it (recovery refuses by the others first)
        del before[record]
    hub = society.spawn("hub-again", "hub")
    assert hub.proc.wait(60) == 78, hub.output()
    assert "do not hash to the root the hub signed" in hub.output()
    after = _records(room)
    assert after.pop(durable.mark_path(room), b"") == b""  # no record: followers wait
    assert after == before
    done = run_cli(society.root, "audit")
    assert done.returncode == 1 and "FAILED at seq 5:" in done.stdout, done.stdout


def test_a_line_is_provable_about_a_second_after_its_post(tmp_path: Path) -> None:
    """With the config `bullpen init` lays down, a posted line is in a signed checkpoint within
    a few seconds (the hub signs soon after the room grows), and a burst is batched."""
    society = Society(tmp_path / "home")
    society.start_hub()
    try:
        checkpoint_of(society, 0)
        stored = _post(society, "prove me")
        began = time.monotonic()
        checkpoint_of(society, stored["seq"], timeout=5)
        delay = time.monotonic() - began
        assert delay < 5
        fill(society, 40, start=1)
        text = checkpoint_of(society, stored["seq"] + 40, timeout=5)
        assert note.parse(text).head().size == stored["seq"] + 40
    finally:
        society.stop_all()


def test_the_json_checkpoint_never_leads_the_signed_tree(tmp_path: Path) -> None:
    """While the tree's note cannot be written, the JSON checkpoint does not move past it; once it
    can, both reach the head, and after a SIGKILL the audit names the rewritten seq by the tree."""
    from tests.reliability.helpers import Seeded
    from tests.reliability.test_tamper_audit import rechain

    society = Society(tmp_path / "home")
    prepare(society)
    hub = society.start_hub()
    fill(society, 2)
    checkpoint_of(society, 2)
    blocker = note_path(society.room).with_name("checkpoint.tmp")
    blocker.mkdir()  # the note's temp file cannot be made: signing fails, as on a broken disk
    fill(society, 10, start=2)
    wait_for(lambda: "could not write a checkpoint" in hub.own_output(), 20, "a failed checkpoint")
    mark = json.loads(checkpoint_file(society.room).read_text())["seq"]
    signed = note.parse(note_path(society.room).read_text()).head().size
    assert mark <= signed, f"the JSON checkpoint names seq {mark}, the signed tree {signed}"
    blocker.rmdir()

    def both_at_12() -> bool:
        json_seq = json.loads(checkpoint_file(society.room).read_text())["seq"]
        size = note.parse(note_path(society.room).read_text()).head().size
        return json_seq == 12 and size == 12

    wait_for(both_at_12, 20, "the note and the JSON checkpoint at seq 12")
    hub.kill()
    lines = [line for line in society.room.read_bytes().split(b"\n") if line]
    society.room.write_bytes(b"".join(line + b"\n" for line in rechain(lines, 4, Seeded(33))))
    done = run_cli(society.root, "audit")
    assert done.returncode == 1 and "FAILED at seq 5:" in done.stdout, done.stdout


def test_verify_out_never_overwrites(tmp_path: Path) -> None:
    """`verify --export N --out FILE` on an existing FILE: exit 2, the file untouched."""
    society = _filled(tmp_path, 3)
    try:
        kept = tmp_path / "kept.json"
        kept.write_text("mine\n")
        done = run_cli(society.root, "verify", "--export", "2", "--out", str(kept))
        assert done.returncode == 2, done.stdout + done.stderr
        assert "remove it or pick another path" in done.stderr
        assert kept.read_text() == "mine\n"
        fresh = tmp_path / "fresh.json"
        done = run_cli(society.root, "verify", "--export", "2", "--out", str(fresh))
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(fresh.read_text())["seq"] == 2
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
    finally:
        society.stop_all()

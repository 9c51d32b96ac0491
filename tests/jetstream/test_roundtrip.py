"""Moving a room between a file and a stream: import, audit from the stream, export, and back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from room.chain import line_hash
from tests.jetstream.helpers import post
from tests.support import HTTP, Society, run_cli, set_room_engine


def test_import_audit_export_round_trip(tmp_path: Path, nats_server: Any) -> None:
    """A JSONL room moved into a stream audits the same, exports byte for byte, and grows on."""
    society = Society(tmp_path / "home")
    hub = society.start_hub()
    for n in range(40):
        post(society, "@echo", f"line {n} \u2028 é", kind="chat", data={"n": n})
        HTTP.post(
            f"{society.strict_url}/say",
            json={
                "from": "stranger",
                "to": "@sink",
                "type": "chat",
                "body": f"s{n}",
                "thread": "t",
            },
        )
    assert hub.stop() == 0
    original = society.room.read_bytes()
    assert run_cli(society.root, "audit").stdout.strip() == "ok: 80 lines"

    # A first import stops part way (only the first 10 lines were in the file it was given).
    set_room_engine(society.root, nats_server.urls, "MOVED", 1)
    partial = tmp_path / "first-ten.jsonl"
    partial.write_bytes(b"".join(line + b"\n" for line in original.split(b"\n")[:10]))
    first = run_cli(society.root, "import", str(partial))
    assert first.returncode == 0, first.stderr
    assert "imported 10 lines" in first.stderr

    # Run again on the whole room: it continues after what the stream holds.
    done = run_cli(society.root, "import", str(society.room))
    assert done.returncode == 0, done.stderr
    assert "already held seq 1..10" in done.stderr and "imported 70 lines" in done.stderr

    audit = run_cli(society.root, "audit")
    assert audit.returncode == 0, audit.stderr
    assert audit.stdout.strip() == "ok: 80 lines"
    assert "checkpoint: seq 80 matches" in audit.stderr  # the JSONL hub's signed checkpoint

    exported = tmp_path / "back.jsonl"
    out = run_cli(society.root, "export", str(exported))
    assert out.returncode == 0, out.stderr
    assert exported.read_bytes() == original
    assert run_cli(society.root, "audit", str(exported)).stdout.strip() == "ok: 80 lines"
    refused = run_cli(society.root, "export", str(exported))
    assert refused.returncode != 0 and "exists" in refused.stderr

    # A hub on the stream continues the seq and the chain from the imported room.
    society.room.rename(society.room.with_name("room.jsonl.imported"))
    society.start_hub()
    line = post(society, "@echo", "after the move", kind="chat")
    assert line["seq"] == 81 and line["prev"] == line_hash(original.split(b"\n")[79])
    assert run_cli(society.root, "audit").stdout.strip() == "ok: 81 lines"

    # The stream now holds more than the file: importing the file again is refused.
    again = run_cli(society.root, "import", str(exported))
    assert again.returncode == 1 and "another room" in again.stderr


def test_import_checks_the_whole_file_before_publishing_anything(
    tmp_path: Path, nats_server: Any
) -> None:
    """An edited line anywhere refuses the import up front: the stream gets no line at all."""
    society = Society(tmp_path / "home")
    society.start_hub()
    for n in range(12):
        post(society, "@echo", f"line {n}", kind="chat")
    society.stop_all()
    lines = society.room.read_bytes().split(b"\n")[:-1]
    set_room_engine(society.root, nats_server.urls, "BROKEN", 1)
    for where in (1, 6):  # seq 2 (the audit's case) and the middle
        doctored = json.loads(lines[where])
        doctored["body"] = "edited"
        edited = list(lines)
        edited[where] = json.dumps(doctored, separators=(",", ":"), ensure_ascii=False).encode()
        broken = tmp_path / f"broken-{where}.jsonl"
        broken.write_bytes(b"".join(line + b"\n" for line in edited))

        done = run_cli(society.root, "import", str(broken))
        assert done.returncode == 1, done.stderr
        assert f"FAILED at seq {where + 1}" in done.stderr, done.stderr
        assert "nothing was imported" in done.stderr
        assert "Traceback" not in done.stderr
        exported = tmp_path / f"what-landed-{where}.jsonl"
        out = run_cli(society.root, "export", str(exported))
        assert out.returncode == 1 and "there is no stream 'BROKEN'" in out.stderr, out.stderr
        assert not exported.exists()

    # The intact file still imports whole afterwards.
    done = run_cli(society.root, "import", str(society.room))
    assert done.returncode == 0, done.stderr
    assert "imported 12 lines" in done.stderr

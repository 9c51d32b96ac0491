"""Several hubs on one stream: one gapless seq, one unbroken chain, one set of used nonces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from room.message import Post
from tests.support import HTTP, REPO, StreamSociety, set_room_engine, wait_for
from trust.audit import audit_file
from trust.proof import SecretSigner

POSTER = str(REPO / "tests" / "tools" / "poster.py")


def second_hub(first: StreamSociety, root: Path) -> StreamSociety:
    """Another home on the same stream, holding the same shared secret (another host, in life)."""
    other = StreamSociety(root, first.servers, len(first.servers))
    other.stream = first.stream
    set_room_engine(root, first.servers, first.stream, len(first.servers))
    secret = other.home.trust.secret_file
    secret.write_bytes(first.home.trust.secret_file.read_bytes())
    return other


def test_two_hubs_posting_concurrently_keep_seq_gapless_and_the_chain_whole(
    tmp_path: Path, nats_cluster: Any
) -> None:
    """8 posting processes, 4 per hub, on a 3-node R3 stream: every ack unique, gapless, audit ok."""
    first = StreamSociety(tmp_path / "a", nats_cluster.urls, nats_cluster.replicas)
    second = second_hub(first, tmp_path / "b")
    try:
        first.start_hub()
        second.start_hub()
        procs = []
        for i, society in enumerate([first, second] * 4):
            argv = [sys.executable, POSTER, society.strict_url, f"client{i}", "100"]
            if i % 2 == 0:  # signed as the operator: their nonces go to the shared bucket
                argv = [sys.executable, POSTER, society.strict_url, "operator", "100"]
                argv += ["--secret-file", str(society.home.trust.secret_file)]
                argv += ["--start", str(i * 1000)]
            procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
        outputs = [p.communicate(timeout=120)[0] for p in procs]
        acks = [
            line.split() for out in outputs for line in out.splitlines() if line.startswith("ack")
        ]
        assert len(acks) == 800, [out.splitlines()[:3] for out in outputs]
        seqs = [int(seq) for _, _, seq in acks]
        assert len(set(seqs)) == 800

        room = first.export()
        lines = [json.loads(raw) for raw in room.read_bytes().splitlines()]
        assert [m["seq"] for m in lines] == list(range(1, 801))
        result = audit_file(room)
        assert result.ok, result.summary()
        by_seq = {m["seq"]: m for m in lines}
        for ack, seq in zip(acks, seqs, strict=True):
            assert by_seq[seq]["data"] == {"k": int(ack[1])}
        assert all(m["verified"] for m in lines if m["from"] == "operator")
        # Both hubs' views reach the same head.
        for society in (first, second):
            wait_for(
                lambda s=society: HTTP.get(f"{s.strict_url}/health").json()["seq"] == 800,
                10,
                "each hub to see every line",
            )
        heads = {HTTP.get(f"{s.strict_url}/health").json()["head"] for s in (first, second)}
        assert len(heads) == 1
        # The hubs really did race: lines were re-stamped after the other hub won a seq.
        logs = "".join(p.output() for s in (first, second) for p in s.procs)
        assert "re-stamping" in logs
    finally:
        second.stop_all()
        first.stop_all()


def test_a_proof_used_at_one_hub_is_refused_at_another(tmp_path: Path, nats_server: Any) -> None:
    """Replay protection holds across hubs: the nonce store is shared, not per hub."""
    first = StreamSociety(tmp_path / "a", nats_server.urls)
    second = second_hub(first, tmp_path / "b")
    try:
        first.start_hub()
        second.start_hub()
        payload: dict[str, Any] = {"from": "operator", "to": "@echo", "type": "ask", "body": "once"}
        payload.update(SecretSigner(first.secret()).prove(Post.model_validate(payload)))
        body = json.dumps(payload)
        assert HTTP.post(f"{first.strict_url}/say", content=body).status_code == 200
        again = HTTP.post(f"{second.strict_url}/say", content=body)
        assert again.status_code == 401, again.text
        assert "nonce" in again.json()["message"]
        assert HTTP.post(f"{first.strict_url}/say", content=body).status_code == 401
        assert len(first.lines()) == 1
    finally:
        second.stop_all()
        first.stop_all()

"""Acknowledged posts survive nats-server processes being killed under load (3-node R3 cluster).

What this proves, and what it cannot (docs/scaling.md): SIGKILL ends a
process but leaves the kernel's page cache, so these are process crashes,
not power failures. A node killed alone must lose nothing acknowledged, on
any server version, because a quorum of the other two holds every line.
Every node killed at once must lose nothing either, because each node wrote
its lines to the kernel before acknowledging them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.jetstream.helpers import with_js
from tests.jetstream.servers import NatsCluster, make_cluster, settle
from tests.support import HTTP, REPO, StreamSociety, wait_for
from trust.audit import audit_file

pytestmark = pytest.mark.long  # one of the suite's slowest: run first (tests/conftest.py)

POSTER = str(REPO / "tests" / "tools" / "poster.py")


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    """A 3-node cluster of its own: these tests kill its nodes."""
    made = make_cluster(tmp_path / "nats", 3)
    made.start()
    try:
        yield made
    finally:
        made.stop()


# Each of 4 posters posts this many: the kill comes after the first KILL_AT, so most of them
# (about 400) meet the kill or what follows it. The count proves nothing more past that:
# 250 each doubled the test's time (53 s on the 2-core CI machine).
PER_POSTER = 125
KILL_AT = 100


def head(society: StreamSociety) -> int:
    try:
        return int(HTTP.get(f"{society.strict_url}/health", timeout=2).json()["seq"])
    except httpx.HTTPError:
        return 0


@pytest.mark.parametrize("victims", ["leader", "every node"])
def test_killed_nodes_lose_no_acknowledged_post(
    tmp_path: Path, cluster: NatsCluster, victims: str
) -> None:
    """SIGKILL the stream's leader (or all three nodes) mid-load: every acked post is there, at its seq."""
    society = StreamSociety(tmp_path / "home", cluster.urls, 3)
    try:
        society.start_hub()
        procs = []
        for i in range(4):
            argv = [sys.executable, POSTER, society.strict_url, f"client{i}", str(PER_POSTER)]
            if i % 2:
                argv = [sys.executable, POSTER, society.strict_url, "operator", str(PER_POSTER)]
                argv += ["--secret-file", str(society.home.trust.secret_file)]
                argv += ["--start", str(i * 1000)]
            procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
        wait_for(lambda: head(society) >= KILL_AT, 60, f"the first {KILL_AT} posts")

        info = with_js(cluster.urls, lambda js: js.stream_info(society.stream))
        leader = info.cluster.leader
        killed = [n for n in cluster.nodes if victims == "every node" or n.name == leader]
        at_kill = head(society)
        for node in killed:
            node.kill()
        if victims == "every node":
            settle(1.0)  # the whole cluster is down for a moment, posts waiting at the hub
            for node in killed:
                node.start()

        outputs = [p.communicate(timeout=150)[0] for p in procs]
        acks = [
            line.split() for out in outputs for line in out.splitlines() if line.startswith("ack")
        ]
        if victims == "leader":
            for node in killed:
                node.start()
        cluster.wait_ready(60)

        after_kill = [a for a in acks if int(a[2]) > at_kill]
        assert after_kill, "the cluster acknowledged nothing after the kill"
        total = 4 * PER_POSTER
        assert len(acks) >= total * 0.9, f"only {len(acks)} of {total} posts were acknowledged"
        room = society.export()
        lines = [json.loads(raw) for raw in room.read_bytes().splitlines()]
        assert [m["seq"] for m in lines] == list(range(1, len(lines) + 1))
        result = audit_file(room)
        assert result.ok, result.summary()
        by_seq = {m["seq"]: m for m in lines}
        for _, k, seq in acks:
            assert by_seq[int(seq)]["data"] == {"k": int(k)}, f"acked post {k} is not at seq {seq}"
        print(f"{cluster.describe()}: {len(acks)} acked, {len(after_kill)} after the kill")
    finally:
        society.stop_all()

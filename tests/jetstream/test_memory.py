"""Memory on JetStream: the index is a projection of the stream, so a second host builds the
same one from its own hub, whatever hub each save came through."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from agents.memory.namespaces import index_path
from tests.jetstream.test_multihub import second_hub
from tests.memory.helpers import save as save_and_wait
from tests.memory.helpers import saved_id, start_lurkers
from tests.support import StreamSociety, run_cli, wait_for


def _entries(society: StreamSociety) -> list[tuple[Any, ...]]:
    """The index's entries, read only ([] while the librarian has not made its tables yet)."""
    path = index_path(society.home)
    if not path.exists():
        return []
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        try:
            return db.execute(
                "SELECT e.seq, s.ns, e.text, e.saved_by, e.msg_id FROM entries e "
                "JOIN spaces s ON s.id = e.space ORDER BY e.seq"
            ).fetchall()
        except sqlite3.OperationalError:  # no tables yet
            return []


def test_a_second_host_projects_the_same_memory_from_the_stream(
    tmp_path: Path, nats_cluster: Any
) -> None:
    """A librarian on each host: saves through either hub land in both indexes, the same
    entries with the same provenance, each answered once; host b's rebuild from its own hub
    agrees, and its recall finds a save made through host a."""
    first = StreamSociety(tmp_path / "a", nats_cluster.urls, nats_cluster.replicas)
    second = second_hub(first, tmp_path / "b")
    try:
        first.start_hub()
        second.start_hub()
        librarians = start_lurkers(first, "librarian") + start_lurkers(second, "librarian")
        for librarian in librarians:  # ready once bound to the shared consumer, not at start
            wait_for(lambda p=librarian: "following the stream" in p.output(), 60, "the bind")
        through_a = save_and_wait(first, "/bullpen/ops", "the petrel host rotates logs at noon")
        through_b = save_and_wait(second, "/bullpen/research", "puffin colonies nest on cliffs")
        assert saved_id(through_a) and saved_id(through_b)
        wait_for(lambda: len(_entries(second)) == 2 == len(_entries(first)), 20, "both indexes")
        assert _entries(second) == _entries(first)
        replies = [m for m in first.lines() if m["from"] == "librarian"]
        assert len(replies) == 2  # one nick on two hosts: each save answered once
        rebuilt = run_cli(second.root, "memory", "rebuild")
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert _entries(second) == _entries(first)
        assert [row[2] for row in _entries(second)] == [
            "the petrel host rotates logs at noon",
            "puffin colonies nest on cliffs",
        ]
        found = run_cli(second.root, "memory", "recall", "petrel", "--json")
        assert found.returncode == 0, found.stderr
        assert [e["id"] for e in json.loads(found.stdout)] == [saved_id(through_a)]
    finally:
        second.stop_all()
        first.stop_all()

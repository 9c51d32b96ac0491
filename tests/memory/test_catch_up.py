"""The librarian killed mid-stream catches up from its cursor: every save indexed once and
answered once, and a rebuild from the room agrees with what it built."""

from __future__ import annotations

import sqlite3

import pytest

from agents.memory.errors import Unavailable
from agents.memory.index import Index
from agents.memory.namespaces import index_path
from tests.memory.helpers import post, replies_to, start_lurkers
from tests.support import Society, run_cli, wait_for


def _rows(society: Society) -> list[tuple[int, str]]:
    path = index_path(society.home)
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return db.execute("SELECT seq, text FROM entries ORDER BY seq").fetchall()


def _save(society: Society, n: int) -> dict:
    text = f"gannet fact {n}"
    return post(society, "@librarian", text, data={"save": {"ns": "/bullpen/ops", "text": text}})


def test_a_librarian_killed_mid_stream_catches_up_without_duplicates(society: Society) -> None:
    """SIGKILL while saves arrive; after a restart all 24 are indexed and answered exactly once."""
    society.start_hub()
    (librarian,) = start_lurkers(society, "librarian")
    sent = [_save(society, n) for n in range(12)]
    wait_for(lambda: len(_rows(society)) >= 3, 20, "the first saves to be indexed")
    librarian.kill()
    indexed_at_kill = len(_rows(society))
    sent += [_save(society, n) for n in range(12, 24)]
    start_lurkers(society, "librarian")
    wait_for(lambda: all(replies_to(society, s["id"]) for s in sent), 40, "a reply to every save")
    rows = _rows(society)
    assert len(rows) == 24 and len({seq for seq, _ in rows}) == 24
    assert sorted(text for _, text in rows) == sorted(f"gannet fact {n}" for n in range(24))
    assert all(len(replies_to(society, s["id"])) == 1 for s in sent)
    assert indexed_at_kill < 24  # it really was stopped part of the way
    before = _rows(society)
    result = run_cli(society.root, "memory", "rebuild")
    assert result.returncode == 0, result.stderr
    assert _rows(society) == before


def test_an_index_of_an_older_layout_is_re_read_from_the_room(society: Society) -> None:
    """An index left by an older bullpen (no format stamp, a cursor past every save) would
    answer lessons from words it no longer matches: a reader refuses it, saying what happens
    next, and the librarian empties it and projects the whole room again."""
    society.start_hub()
    (librarian,) = start_lurkers(society, "librarian")
    sent = [_save(society, n) for n in range(3)]
    wait_for(lambda: all(replies_to(society, s["id"]) for s in sent), 20, "the saves answered")
    librarian.stop()
    path = index_path(society.home)
    with sqlite3.connect(path) as db:  # what the first layout left: no format row, same tables
        db.execute("DELETE FROM meta WHERE name = 'format'")
        db.execute("DELETE FROM entries WHERE seq = ?", (sent[0]["seq"],))
    with pytest.raises(Unavailable, match=r"older bullpen.*memory rebuild"):
        Index.open(path, create=False)
    start_lurkers(society, "librarian")
    wait_for(lambda: len(_rows(society)) == 3, 20, "the room re-read into the index")
    reader = Index.open(path, create=False)
    with reader:
        assert [e.text for e in reader.recall('"gannet"', "/bullpen/ops", 5)] != []
    assert all(len(replies_to(society, s["id"])) == 1 for s in sent)  # re-reading answers none

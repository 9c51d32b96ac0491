"""The librarian's index: SQLite in WAL mode, an FTS5 table ranked by BM25, plain SQL.

`entries` holds every save the projection accepted, keyed by its room seq
(so applying a save twice is a no-op); `entries_fts` indexes the text of the
live ones only (neither superseded nor retracted), as an external-content
table, so the text is stored once. `refusals` records the saves that were
not taken and why; `meta` holds the seq the projection has read through.

Writers are the librarian and `bullpen memory rebuild`; lurkers only read
(a reader never blocks the writer in WAL mode). Query text reaches MATCH as
the user wrote it, so FTS5 syntax works, within the bounds of
agents/memory/query.py; a syntax error, a query over a bound or past its
deadline is Refused (the writer's error), never a crash or Unavailable.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agents.memory.entry import Entry, Save, entry_id, seq_of
from agents.memory.errors import Refused, Unavailable
from agents.memory.namespaces import GENERAL_LESSONS, prefix_range
from agents.memory.query import (
    DEADLINE_S,
    DeadlinePassed,
    bounded,
    check_query,
    deadline_refusal,
    syntax_refusal,
)

__all__ = ["Index", "terms_query"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS spaces (id INTEGER PRIMARY KEY, ns TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    space INTEGER NOT NULL REFERENCES spaces(id),
    text TEXT NOT NULL,
    saved_by TEXT NOT NULL,
    msg_id TEXT NOT NULL,
    ts TEXT NOT NULL,
    tags TEXT,
    source TEXT,
    key TEXT,
    traces TEXT,
    supersedes INTEGER,
    superseded_by INTEGER,
    retracted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS entries_live
    ON entries(space, seq) WHERE superseded_by IS NULL AND retracted = 0;
CREATE INDEX IF NOT EXISTS entries_key ON entries(key) WHERE key IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts
    USING fts5(text, nsk, scoped, content='entries', content_rowid='seq');
CREATE TABLE IF NOT EXISTS refusals (
    seq INTEGER PRIMARY KEY,
    msg_id TEXT NOT NULL,
    saved_by TEXT NOT NULL,
    reason TEXT NOT NULL,
    flag INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_COLUMNS = (
    "e.seq, (SELECT ns FROM spaces WHERE id = e.space), e.text, e.saved_by, e.msg_id, e.ts, e.tags, e.source, e.key, e.traces, "
    "e.supersedes, e.superseded_by, e.retracted"
)
_WORD = re.compile(r"\w{2,}", re.UNICODE)
MAX_TERMS = 12
# The layout of the scoped words and the rules it was projected under; an index of another
# is re-read from the room. 3: lessons namespaces are guarded (namespaces.writer_refusal), so
# a save an older index took into another nick's lessons is dropped on the re-read.
FORMAT = "3"
MAX_K = 100
_PROBE = "SELECT 1 FROM entries_fts WHERE entries_fts MATCH ? AND rowid = 0"


def _token(kind: str, ns: str) -> str:
    return kind + hashlib.sha1(ns.encode()).hexdigest()[:12]


def ns_tokens(ns: str) -> str:
    """What the FTS table's `nsk` column holds for an entry in `ns`: one token for the
    namespace itself and one for each of its prefixes, so MATCH can filter on them."""
    parts = ns.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(2, len(parts) + 1)]
    return " ".join([_token("x", ns), *(_token("p", prefix) for prefix in prefixes)])


_PLAIN = re.compile(r"[^\W_]{2,}", re.UNICODE)
# fmt: off
STOP_WORDS = frozenset((
    "an", "and", "are", "as", "at", "be", "but", "by", "do", "for", "from", "has", "have", "if",
    "in", "into", "is", "it", "its", "no", "not", "of", "on", "or", "so", "that", "the", "then",
    "this", "to", "was", "we", "what", "when", "will", "with", "you", "your", "my", "me", "our",
))
# fmt: on


def words_of(text: str, limit: int | None = None) -> list[str]:
    """A text's distinct plain words, lowercased, stop words dropped, in order."""
    seen: dict[str, None] = {}
    for word in _PLAIN.findall(text.lower()):
        if word not in STOP_WORDS:
            seen.setdefault(word, None)
            if limit is not None and len(seen) >= limit:
                break
    return list(seen)


def space_tag(space: int) -> str:
    """The prefix of a lesson's scoped words: its namespace's row id, fixed width, so a tag
    and a word never run together ambiguously and two namespaces never share a tag."""
    return f"s{space:07d}"


def scoped_tokens(ns: str, space: int, text: str) -> str:
    """The `scoped` column of a lesson: each word tagged with its namespace, so the wake's
    recall reads only that namespace's doclists (its cost follows the namespace, not the
    index) and BM25 weighs words by that namespace's own statistics."""
    if ns != GENERAL_LESSONS and not ns.startswith(GENERAL_LESSONS + "/"):
        return ""
    tag = space_tag(space)
    return " ".join(tag + word for word in _PLAIN.findall(text.lower()))


def terms_query(*texts: str) -> str | None:
    """An FTS5 query matching any word of `texts` (each quoted: no syntax can leak in)."""
    seen: dict[str, None] = {}
    for text in texts:
        for word in _WORD.findall(text.lower()):
            seen.setdefault(word.replace('"', ""), None)
            if len(seen) >= MAX_TERMS:
                break
    return " OR ".join(f'"{word}"' for word in seen) or None


def _ranked(rank: str, where: str | None) -> str:
    """A ranked MATCH: the best k rowids are chosen first (by BM25, and the namespace rule
    `where` on entries `e` when the MATCH alone is not it), then only those k rows are read
    in full, so a query costs its ranking, not every column of every match (binds: the
    MATCH, the `where` arguments, k)."""
    join, rule = (
        ("JOIN entries e ON e.seq = entries_fts.rowid", f"AND {where}") if where else ("", "")
    )
    return (
        f"SELECT {_COLUMNS}, best.rank FROM (SELECT entries_fts.rowid AS seq, {rank} AS rank "
        f"FROM entries_fts {join} WHERE entries_fts MATCH ? {rule} ORDER BY rank LIMIT ?) AS best "
        "JOIN entries e ON e.seq = best.seq ORDER BY best.rank"
    )


def _entry(row: tuple[Any, ...], rank: float | None = None) -> Entry:
    return Entry(
        seq=row[0],
        ns=row[1],
        text=row[2],
        saved_by=row[3],
        msg_id=row[4],
        ts=row[5],
        tags=[t for t in (row[6] or "").split(",") if t],
        source=row[7],
        key=row[8],
        traces=json.loads(row[9]) if row[9] else [],
        supersedes=entry_id(row[10]) if row[10] is not None else None,
        superseded_by=entry_id(row[11]) if row[11] is not None else None,
        retracted=bool(row[12]),
        rank=rank,
    )


def _format(db: sqlite3.Connection) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
    return str(row[0]) if row else None


def _settle_format(db: sqlite3.Connection) -> None:
    """Stamp a new index with FORMAT; empty one of another format in the same transaction
    (its cursor then reads 0, so the projection re-reads the room into the layout this code
    queries: the index is a projection, nothing is lost)."""
    found = _format(db)
    if found == FORMAT:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        tables = ("meta", "entries", "refusals")
        if found is not None or any(
            db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in tables
        ):
            for table in ("entries_fts", "entries", "spaces", "refusals", "meta"):
                db.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in filter(str.strip, SCHEMA.split(";")):
                db.execute(statement)
        db.execute("INSERT OR REPLACE INTO meta(name, value) VALUES('format', ?)", (FORMAT,))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class Index:
    """One connection to the index file."""

    def __init__(self, db: sqlite3.Connection, path: Path, deadline_s: float = DEADLINE_S) -> None:
        self.db = db
        self.path = path
        self.deadline_s = deadline_s  # the most a recall's query may run (query.py)

    @classmethod
    def open(cls, path: Path, *, create: bool = True, deadline_s: float = DEADLINE_S) -> Index:
        """The index at `path`; with create=False (a reader) a missing file is Unavailable."""
        if not create and not path.is_file():
            raise Unavailable(
                f"there is no memory index at {path} yet; start the librarian (`bullpen up`) "
                "or build it with `bullpen memory rebuild`"
            )
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = sqlite3.connect(
                f"file:{path}?mode={'rwc' if create else 'rw'}",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=10.0,
            )
            db.execute("PRAGMA busy_timeout = 10000")
            if create:
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = NORMAL")
                db.executescript(SCHEMA)
                _settle_format(db)
            elif _format(db) != FORMAT:
                db.close()
                raise Unavailable(
                    f"the memory index {path} was written by an older bullpen; the librarian "
                    "rebuilds it from the room when it starts (or run `bullpen memory rebuild`)"
                )
        except sqlite3.Error as exc:
            raise Unavailable(f"the memory index {path} cannot be opened ({exc})") from None
        return cls(db, path, deadline_s)

    def close(self) -> None:
        self.db.close()

    def optimize(self) -> None:
        """Merge the FTS index into one segment (a rebuild does this once at the end): every
        term is then one lookup; then give back the pages the merge freed (a tenth of the
        file). The live index keeps FTS5's own incremental merging."""
        with self.writing():
            self.db.execute("INSERT INTO entries_fts(entries_fts) VALUES('optimize')")
        self.db.execute("VACUUM")

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @contextmanager
    def writing(self) -> Iterator[None]:
        """One write transaction: everything in it lands, or nothing does."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- the projection's writes (inside `writing`) ---------------------------

    def cursor(self) -> int:
        row = self.db.execute("SELECT value FROM meta WHERE name = 'through'").fetchone()
        return int(row[0]) if row else 0

    def set_cursor(self, seq: int) -> None:
        self.db.execute(
            "INSERT INTO meta(name, value) VALUES('through', ?) "
            "ON CONFLICT(name) DO UPDATE SET value = excluded.value WHERE "
            "CAST(meta.value AS INTEGER) < CAST(excluded.value AS INTEGER)",
            (str(seq),),
        )

    def seen(self, seq: int) -> bool:
        found = self.db.execute(
            "SELECT 1 FROM entries WHERE seq = ? UNION ALL SELECT 1 FROM refusals WHERE seq = ?",
            (seq, seq),
        ).fetchone()
        return found is not None

    def add(self, seq: int, msg_id: str, saved_by: str, ts: str, save: Save, ns: str) -> Entry:
        """Index one accepted save; Refused when what it supersedes is unknown or stale."""
        known = self.get(seq)
        if known is not None:  # applied before: the projection is idempotent by seq
            return known
        old: int | None = None
        if save.supersedes is not None:
            old = seq_of(save.supersedes)
            row = self.db.execute(
                "SELECT superseded_by, text FROM entries WHERE seq = ?", (old,)
            ).fetchone()
            if row is None:
                raise Refused(f"supersedes {save.supersedes}, but there is no such entry")
            if row[0] is not None:
                raise Refused(
                    f"{save.supersedes} was already superseded by {entry_id(row[0])}; "
                    f"supersede the newest one, {entry_id(row[0])}"
                )
        self.db.execute("INSERT OR IGNORE INTO spaces(ns) VALUES (?)", (ns,))
        space = self.db.execute("SELECT id FROM spaces WHERE ns = ?", (ns,)).fetchone()[0]
        self.db.execute(
            "INSERT OR IGNORE INTO entries(seq, space, text, saved_by, msg_id, ts, tags, source, "
            "key, traces, supersedes, retracted) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                seq,
                space,
                save.text,
                saved_by,
                msg_id,
                ts,
                ",".join(save.tags) or None,
                save.source,
                save.key,
                json.dumps(save.traces) if save.traces else None,
                old,
                int(save.retract),
            ),
        )
        if old is not None:
            self._unindex(old)
            self.db.execute("UPDATE entries SET superseded_by = ? WHERE seq = ?", (seq, old))
        if not save.retract:
            self.db.execute(
                "INSERT INTO entries_fts(rowid, text, nsk, scoped) VALUES (?, ?, ?, ?)",
                (seq, save.text, ns_tokens(ns), scoped_tokens(ns, space, save.text)),
            )
        found = self.get(seq)
        assert found is not None
        return found

    def _unindex(self, seq: int) -> None:
        row = self.db.execute(
            "SELECT text, retracted, superseded_by, (SELECT ns FROM spaces WHERE id = space), "
            "space FROM entries WHERE seq = ?",
            (seq,),
        ).fetchone()
        if row is not None and not row[1] and row[2] is None:
            self.db.execute(
                "INSERT INTO entries_fts(entries_fts, rowid, text, nsk, scoped) "
                "VALUES('delete', ?, ?, ?, ?)",
                (seq, row[0], ns_tokens(row[3]), scoped_tokens(row[3], row[4], row[0])),
            )

    def refuse(self, seq: int, msg_id: str, saved_by: str, reason: str, *, flag: bool) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO refusals(seq, msg_id, saved_by, reason, flag) VALUES (?,?,?,?,?)",
            (seq, msg_id, saved_by, reason, int(flag)),
        )

    def pending_flags(self) -> list[tuple[int, str, str, str]]:
        """Refused saves nobody was told about yet: (seq, msg_id, poster, reason)."""
        return self.db.execute(
            "SELECT seq, msg_id, saved_by, reason FROM refusals WHERE flag = 1 ORDER BY seq"
        ).fetchall()

    def mark_flagged(self, seqs: Iterable[int]) -> None:
        self.db.executemany("UPDATE refusals SET flag = 0 WHERE seq = ?", [(s,) for s in seqs])

    # -- reads ------------------------------------------------------------------

    def get(self, seq: int) -> Entry | None:
        row = self.db.execute(f"SELECT {_COLUMNS} FROM entries e WHERE seq = ?", (seq,)).fetchone()
        return _entry(row) if row else None

    def refusal(self, seq: int) -> str | None:
        row = self.db.execute("SELECT reason FROM refusals WHERE seq = ?", (seq,)).fetchone()
        return str(row[0]) if row else None

    def recall(self, query: str | None, ns: str, k: int, *, exact: bool = False) -> list[Entry]:
        """The live entries under `ns` (only `ns` itself when exact) best matching `query`
        (FTS5 syntax, ranked by BM25); with no query, the newest ones."""
        if not 1 <= k <= MAX_K:
            raise Refused(f"k is {k}; ask for between 1 and {MAX_K} entries")
        same, low, high = prefix_range(ns)
        if exact:
            spaces, args = "SELECT id FROM spaces WHERE ns = ?", [same]
        else:
            spaces, args = (
                "SELECT id FROM spaces WHERE ns = ? OR (ns >= ? AND ns < ?)",
                [same, low, high],
            )
        if query is None or not query.strip():
            rows = self.db.execute(
                f"SELECT {_COLUMNS} FROM entries e WHERE e.space IN ({spaces}) "
                "AND e.superseded_by IS NULL AND e.retracted = 0 ORDER BY e.seq DESC LIMIT ?",
                (*args, k),
            ).fetchall()
            return [_entry(row) for row in rows]
        check_query(query)
        # The namespace narrows the MATCH itself (its token in `nsk`), so the cost follows
        # the namespace's entries, not the whole index's; the SQL filter below is the rule.
        scoped = f"nsk : {_token('x' if exact else 'p', same)} AND text : ({query})"
        try:
            with bounded(self.db, self.deadline_s):
                # the query as written, parsed on its own (a seek to no row): a syntax error
                # names the writer's text, and scoping cannot turn a broken query into a valid one
                self.db.execute(_PROBE, (query,)).fetchall()
                rows = self.db.execute(
                    _ranked("bm25(entries_fts, 1.0, 0.0, 0.0)", f"e.space IN ({spaces})"),
                    (scoped, *args, k),
                ).fetchall()
        except DeadlinePassed:
            raise deadline_refusal(query, self.deadline_s) from None
        except sqlite3.OperationalError as exc:
            if self._readable():  # the index answers a known-good query: this one is at fault
                raise syntax_refusal(query, str(exc).strip().rstrip(":")) from None
            raise Unavailable(f"the memory index {self.path} could not be read ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise Unavailable(f"the memory index {self.path} could not be read ({exc})") from None
        return [_entry(row[:-1], row[-1]) for row in rows]

    def _readable(self) -> bool:
        """Whether the index answers a query that is certainly good: when it does, what
        SQLite refused was the writer's query, not the index."""
        try:
            self.db.execute(_PROBE, ('"probe"',)).fetchall()
        except sqlite3.DatabaseError:
            return False
        return True

    def lessons(self, ns: str, words: list[str], k: int) -> list[Entry]:
        """The live lessons filed exactly under `ns` best matching any of `words` (BM25 over
        that namespace alone, through the `scoped` column); ns is under lessons-learned.
        The namespace's tag is its row id, so the MATCH alone is the namespace rule."""
        space = self.db.execute("SELECT id FROM spaces WHERE ns = ?", (ns,)).fetchone()
        if not words or space is None:
            return []
        tag = space_tag(space[0])
        match = "scoped : (" + " OR ".join(f'"{tag}{word}"' for word in words) + ")"
        rows = self.db.execute(
            _ranked("bm25(entries_fts, 0.0, 0.0, 1.0)", None), (match, k)
        ).fetchall()
        return [_entry(row[:-1], row[-1]) for row in rows]

    def live_with_key(self, key: str) -> list[Entry]:
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM entries e WHERE key = ? AND superseded_by IS NULL "
            "AND retracted = 0 ORDER BY seq",
            (key,),
        ).fetchall()
        return [_entry(row) for row in rows]

    def counts(self) -> dict[str, int]:
        """Live entries per namespace."""
        rows = self.db.execute(
            "SELECT s.ns, count(*) FROM entries e JOIN spaces s ON s.id = e.space "
            "WHERE e.superseded_by IS NULL AND e.retracted = 0 GROUP BY s.ns ORDER BY s.ns"
        ).fetchall()
        return {str(ns): int(n) for ns, n in rows}

    def size(self) -> int:
        """The bytes the index takes on disk (the database and its WAL)."""
        wal = self.path.with_name(self.path.name + "-wal")
        return self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)

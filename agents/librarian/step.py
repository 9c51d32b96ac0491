"""The @librarian step: keep the index caught up with the room, answer saves and asks.

Woken by a save (a trusted, verified post whose data holds `save`), it
catches the projection up through that post's seq and replies with the
entry's id, or fails with why it was refused. Woken by any other ask, it
recalls over the manual-lookup namespaces (`/bullpen` prefix unless the ask
names `ns`): `data.query` in FTS5 syntax, or else any word of the body.
The asks are answered one at a time, so a query over the bounds of
agents/memory/query.py is refused before it runs, and one past its deadline
is stopped: a costly ask cannot hold the saves queued behind it.

Saves the lurker does not wake for (untrusted or unverified posters) are
still projected, as refused, on the periodic tick, which answers each with
a flag reply, once. The same tick saves a new home's seed entries
(agents/librarian/seed.py). The index and the room reader are made in `prepare`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from agents.librarian.seed import Seeder
from agents.memory.errors import Refused
from agents.memory.index import Index, terms_query
from agents.memory.namespaces import ROOT, index_path, memory_config, normalize
from agents.memory.projection import Rules, catch_up, hub_reader
from agents.runtime.outcome import Outbox, OutPost
from agents.runtime.step import Reply, StepContext
from room.message import Message

__all__ = ["Librarian", "librarian"]

log = structlog.get_logger("agents.librarian")
DEFAULT_K = 5


def recall_reply(index: Index, data: dict[str, Any], body: str) -> Reply:
    """The answer to a recall ask: the best entries, each with its provenance."""
    query = data.get("query")
    if query is not None and not isinstance(query, str):
        raise Refused("data.query must be a string (FTS5 syntax)")
    if query is None:
        query = terms_query(body)
        if query is None:
            raise Refused("the ask holds no words to look up; say what to recall")
    ns = normalize(data.get("ns", ROOT))
    k = data.get("k", DEFAULT_K)
    if not isinstance(k, int) or isinstance(k, bool):
        raise Refused("data.k must be a whole number of entries")
    found = index.recall(query, ns, k)
    lines = [f"{e.id} {e.ns} ({e.saved_by}): {' '.join(e.text.split())}" for e in found]
    text = "\n".join(lines) if lines else f"nothing under {ns} matches"
    return Reply(text, {"ns": ns, "query": query, "results": [e.to_dict() for e in found]})


class Librarian:
    """One librarian per process: the index it writes and how it reads the room."""

    def __init__(self) -> None:
        self.index: Index | None = None
        self.rules: Rules | None = None
        self.read: Any = None
        self._lock: asyncio.Lock | None = None
        self.seeder: Seeder | None = None

    def prepare(self, ctx: StepContext) -> None:
        home = ctx.home
        self.index = Index.open(index_path(home), deadline_s=memory_config(home).query_deadline_s)
        self.rules = Rules.of(home, ctx.nick)
        self.read = hub_reader(home.client(ctx.nick), ctx.nick)
        self.seeder = Seeder(home.root, ctx.nick)

    async def _catch_up(self, through: int = 0) -> Index:
        assert self.index is not None and self.rules is not None
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            await catch_up(self.index, self.read, self.rules, through)
        return self.index

    async def __call__(self, message: Message, ctx: StepContext) -> Reply:
        index = await self._catch_up(message.seq)
        data = message.data if isinstance(message.data, dict) else {}
        if "save" not in data:
            return recall_reply(index, data, message.body)
        entry = index.get(message.seq)
        if entry is None:
            raise Refused(index.refusal(message.seq) or "the save was not indexed")
        said = f"saved {entry.id} in {entry.ns}"
        if entry.supersedes:
            said += f", superseding {entry.supersedes}"
        return Reply(said, {"saved": entry.id, "ns": entry.ns, "supersedes": entry.supersedes})

    async def tick(self, ctx: StepContext) -> Outbox | None:
        """Project what arrived without waking us, and flag each untrusted save once."""
        index = await self._catch_up()
        seeds = self.seeder.posts(index) if self.seeder is not None else []
        pending = index.pending_flags()
        if not pending:
            return Outbox(seeds) if seeds else None
        with index.writing():
            index.mark_flagged(seq for seq, *_ in pending)
        posts = [
            OutPost(
                to=f"@{poster}",
                body=f"[{ctx.nick}: not indexed] {reason}",
                type="reply",
                data={"flag": "memory_refused", "reason": reason},
                in_reply_to=msg_id,
            )
            for _, msg_id, poster, reason in pending
        ]
        log.info("flagged refused saves", count=len(posts))
        return Outbox([*seeds, *posts])


librarian = Librarian()

"""The knowledge base's files, for a step that runs on a host without the knowledge base.

The knowledge base is read where each step runs. Steps 0-2 (@context, @termgen,
@retriever) read its index and check its files, so they run where it is. Step 5
(@excerpter) needs the content of the files step 2 found, and may run elsewhere: so the
retriever puts each candidate file's bytes in the room's object store and names their
SHA-256 in the candidate (`sha256`), which the foreman carries to step 5 in the chosen
and other rows. The excerpter reads a file where the knowledge base is on its own host
when the bytes there hash to that name (one host, or a shared folder: nothing fetched),
and otherwise fetches them by the name and checks them (agents/objects/travel.py, the
one way every pipeline does this); a file it can have neither way fails the step, naming
the file, the object, the nick and the host.

The bytes fetched are hostile input: bounded by MAX_KB_FILE_BYTES, checked against their
name, parsed by the same gates as a file read here, and never written anywhere: the file
name they are filed under comes from the ask and only ever labels them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.expedition.kb import (
    CORPUS_PREFIX,
    MAX_KB_FILE_BYTES,
    Document,
    document_of,
    locate,
    read_document,
    read_kb_bytes,
)
from agents.objects import here
from agents.objects.travel import find_or_fetch, put_all
from room.errors import BullpenError, StepFailed
from room.objectnames import is_name

if TYPE_CHECKING:
    from agents.runtime.step import StepContext

__all__ = ["KbReader", "hand_on_files", "handed_on"]

ADVICE = (
    "Run @{nick} where the knowledge base is, or let every expedition step's host reach the "
    "room's object store and start the dig again (bullpen docs scaling, 'Files travel "
    "through the store')"
)


async def hand_on_files(
    ctx: StepContext, kb: Path, candidates: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str | None]:
    """The candidates, each with the SHA-256 of its file's bytes (put in the store) when it
    could be stored; and why not, when one could not (on one host nothing needs it)."""
    blobs: list[bytes] = []
    readable: list[int] = []
    for number, candidate in enumerate(candidates):
        path, _ = locate(kb, str(candidate["file"]))
        if path is None:
            continue
        try:
            blobs.append(read_kb_bytes(kb, path))
        except (OSError, ValueError, BullpenError):
            continue  # step 5 flags it, as it would have
        readable.append(number)
    names, problem = await put_all(ctx.home, ctx.nick, "retrieve", blobs)
    handed = [dict(candidate) for candidate in candidates]
    for number, name in zip(readable, names, strict=True):
        if name is not None:
            handed[number]["sha256"] = name
    return handed, problem


@dataclass
class KbReader:
    """Step 5's reads: each file from the knowledge base here, or fetched by its SHA-256."""

    ctx: StepContext
    kb: Path
    step: str = "excerpts"  # the step named in a failure: step 5, or the brief's anchor
    fetched: list[str] = field(default_factory=list)  # files fetched from the store

    async def read(
        self, item: dict[str, Any]
    ) -> tuple[tuple[Document | None, str | None], str | None]:
        """(read_document's answer for the item's file, the SHA-256 of the bytes read when
        they were named); StepFailed when the file is neither here nor fetchable."""
        file = str(item["file"])
        sha = item.get("sha256")
        if not isinstance(sha, str) or not is_name(sha):
            if not self.kb.is_dir():
                raise StepFailed(
                    f"the knowledge base {self.kb} is not on host {here()} where "
                    f"@{self.ctx.nick} runs (step {self.step}), and the ask names no SHA-256 for "
                    f"{file} to fetch it by (the retriever's reply says why, in "
                    f"content_problem). {ADVICE.format(nick=self.ctx.nick)}"
                )
            return read_document(self.kb, file), None
        path, _ = locate(self.kb, file) if self.kb.is_dir() else (None, None)
        places = [] if path is None else [(path, lambda: read_kb_bytes(self.kb, path))]
        found, data = await find_or_fetch(
            self.ctx.home,
            self.ctx.nick,
            self.step,
            sha,
            places,
            what=f"the knowledge-base file {file} (object {sha})",
            advice=ADVICE.format(nick=self.ctx.nick),
            limit=MAX_KB_FILE_BYTES,
        )
        if found is None:
            self.fetched.append(file)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return (None, f"[KB_FILE_UNREADABLE:{file}]"), sha
        return document_of(file, text), sha


def handed_on(data: dict[str, Any], file: str) -> dict[str, Any] | None:
    """The item of `data`'s excerpts, direct hits or deep cuts that names `file` (as the Dig
    Report lists it, or with a leading `Corpus/`) with the SHA-256 of its bytes; else None."""
    wanted = {file, file.removeprefix(CORPUS_PREFIX)}
    for key in ("excerpts", "direct_hits", "deep_cuts"):
        for item in data.get(key) or []:
            named = isinstance(item, dict) and str(item.get("file")) in wanted
            if named and isinstance(item.get("sha256"), str) and is_name(item["sha256"]):
                return dict(item)
    return None

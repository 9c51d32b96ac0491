"""`bullpen memory ...`: save, recall, show, namespaces, rebuild, sync.

Thin: parse, call, print, exit code. A save goes through the room to
@librarian; recall, show and namespaces read the home's index directly; a
rebuild reads the whole room into a fresh index and swaps it in atomically
(SQLite's backup into the live file, so a reader sees the old or the new).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from agents.home import Home
from agents.librarian.client import ask_librarian, checked_save
from agents.memory import namespace_counts
from agents.memory.entry import seq_of
from agents.memory.errors import Refused
from agents.memory.index import Index
from agents.memory.namespaces import ROOT, index_path, memory_config, normalize
from agents.memory.projection import Reader, Rules, catch_up, file_reader, hub_reader
from room import strictjson
from room.client import read_file
from room.errors import UsageError

__all__ = ["cmd_memory", "rebuild"]


def _reader(home: Home) -> Index:
    return Index.open(
        index_path(home), create=False, deadline_s=memory_config(home).query_deadline_s
    )


def _room_reader(home: Home, librarian: str) -> Reader:
    if home.society.room.engine == "jsonl" and home.room_path.exists():
        return file_reader(home.room_path, librarian)
    return hub_reader(home.client(), librarian)


async def rebuild(home: Home) -> dict[str, int]:
    """Project the whole room into a new index, then swap it in; the live counts."""
    path = index_path(home)
    librarian = memory_config(home).librarian
    rules = Rules.of(home, librarian, notify=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".rebuild-") as scratch:
        fresh = Index.open(Path(scratch) / "memory.sqlite")
        try:
            await catch_up(fresh, _room_reader(home, librarian), rules)
            fresh.optimize()
            live = Index.open(path)
            try:
                fresh.db.backup(live.db)
                return live.counts()
            finally:
                live.close()
        finally:
            fresh.close()


def _print_entry(entry: dict[str, Any]) -> None:
    print(f"{entry['id']}  {entry['ns']}  saved by {entry['saved_by']} (seq {entry['seq']})")
    print(f"    {' '.join(entry['text'].split())}")
    if entry.get("source"):
        print(f"    source: {entry['source']}")


async def _save(home: Home, args: argparse.Namespace) -> int:
    save: dict[str, Any] = {"ns": args.ns, "text": args.text}
    for key in ("source", "supersedes"):
        if getattr(args, key):
            save[key] = getattr(args, key)
    if args.tag:
        save["tags"] = args.tag
    nick = args.as_nick or home.society.operator
    body = checked_save(home, save, nick)
    async with home.client(nick) as client:
        line = await ask_librarian(home, client, f"remember: {body['text'][:200]}", {"save": body})
    print(line["body"])
    return 0


def _recall(home: Home, args: argparse.Namespace) -> int:
    ns = normalize(args.ns or ROOT, "--ns")
    index = _reader(home)
    try:
        found = [e.to_dict() for e in index.recall(args.query, ns, args.k)]
    finally:
        index.close()
    if args.json:
        print(json.dumps(found, ensure_ascii=False, indent=2))
        return 0
    for entry in found:
        _print_entry(entry)
    if not found:
        print(f"nothing under {ns} matches {args.query!r}", file=sys.stderr)
    return 0


def _show(home: Home, args: argparse.Namespace) -> int:
    seq = seq_of(args.id)
    index = _reader(home)
    try:
        entry = index.get(seq)
        refusal = index.refusal(seq)
    finally:
        index.close()
    if entry is None:
        raise Refused(
            f"there is no entry {args.id}"
            + (f" (that save was refused: {refusal})" if refusal else "")
        )
    shown = entry.to_dict()
    for key, value in shown.items():
        if value not in (None, [], ""):
            print(f"{key:14} {', '.join(value) if isinstance(value, list) else value}")
    line = asyncio.run(_room_line(home, seq))
    print("room line     " + (strictjson.dumps(line) if line else "(not found in the room)"))
    return 0


async def _room_line(home: Home, seq: int) -> dict[str, Any] | None:
    if home.society.room.engine == "jsonl" and home.room_path.exists():
        lines, _ = read_file(home.room_path, seq - 1, 1)
    else:
        async with home.client() as client:
            lines, _ = await client.read(seq - 1, 1)
    return lines[0] if lines and lines[0].get("seq") == seq else None


def _namespaces(home: Home, as_json: bool = False) -> int:
    table = namespace_counts(home)
    if as_json:  # [{"ns", "count", "declared", "meaning"}]
        rows = [{"ns": ns, **row} for ns, row in table.items()]
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    width = max((len(ns) for ns in table), default=10)
    for ns, row in table.items():
        meaning = row["meaning"] if row["declared"] else "NOT DECLARED: add it or move its entries"
        print(f"{ns:{width}}  {row['count']:6}  {meaning}")
    stray = [ns for ns, row in table.items() if not row["declared"]]
    if stray:
        print(
            f"{len(stray)} namespace(s) hold entries but are not declared in [memory.namespaces]",
            file=sys.stderr,
        )
    return 0


def cmd_memory(args: argparse.Namespace) -> int:
    home = Home.at(args.home)
    home.require()
    action = args.action
    if action is None:
        raise UsageError("say what to do: bullpen memory save|recall|show|namespaces|rebuild|sync")
    try:
        if action == "save":
            return asyncio.run(_save(home, args))
        if action == "recall":
            return _recall(home, args)
        if action == "show":
            return _show(home, args)
        if action == "namespaces":
            return _namespaces(home, getattr(args, "json", False))
        if action == "rebuild":
            counts = asyncio.run(rebuild(home))
            print(f"rebuilt {index_path(home)}: {sum(counts.values())} live entries")
            return 0
        from agents.librarian.sync import sync

        for line in asyncio.run(sync(home)):
            print(line)
        return 0
    except Refused as exc:
        raise UsageError(exc.message) from None

"""The knowledge base's files through the room's object store (agents/expedition/travel.py),
against a real hub: the retriever hands each candidate file on by SHA-256, the excerpter
reads it where the knowledge base is, fetches and checks it where it is not, and fails
loud, naming the file, the step, the nick and the host, when the object is missing or
altered."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from agents.expedition import late_steps
from agents.expedition.late_steps import extract_excerpts
from agents.expedition.steps import retrieve_candidates
from room.errors import StepFailed
from tests.expedition.sim import ask, step_context
from tests.support import Society

TERMS = ["patience", "waiting", "cure", "mortar"]


@pytest.fixture
def demo(tmp_path: Path) -> Society:
    made = Society(tmp_path / "home", demo=True)
    made.start_hub()
    return made


def _retrieved(society: Society, kb: Path) -> list[dict[str, Any]]:
    # the operator's nick is privileged and proves itself: it may store objects
    ctx = step_context(society.home, nick=society.home.society.operator)
    data = {"context": {"kb": str(kb)}, "terms": TERMS}
    reply = asyncio.run(retrieve_candidates(ask(data, to="retriever"), ctx))
    assert "content_problem" not in reply.data, reply.data
    return list(reply.data["candidates"])


def _excerpts(society: Society, kb: Path, items: list[dict[str, Any]]) -> dict[str, Any]:
    ctx = step_context(society.home, nick=society.home.society.operator)
    chosen = [{**item, "kind": "direct"} for item in items]
    data = {"context": {"kb": str(kb)}, "chosen": chosen, "others": []}
    return dict(asyncio.run(extract_excerpts(ask(data, to="excerpter"), ctx)).data)


def test_the_excerpter_fetches_the_files_the_retriever_handed_on(
    demo: Society, tmp_path: Path
) -> None:
    kb = demo.root / "kb"
    candidates = _retrieved(demo, kb)
    assert candidates
    originals = {c["file"]: (kb / c["file"]).read_bytes() for c in candidates}
    for candidate in candidates:  # each named by the hash of its file's bytes
        assert candidate["sha256"] == hashlib.sha256(originals[candidate["file"]]).hexdigest()
    # Where the knowledge base is: read there, nothing fetched.
    here = _excerpts(demo, kb, candidates)
    assert here["fetched"] == [] and here["excerpts"]
    # On "another host": the same path, no knowledge base there. Fetched and checked.
    shutil.move(kb, tmp_path / "kb-on-the-other-host")
    away = _excerpts(demo, kb, candidates)
    assert sorted(away["fetched"]) == sorted(originals)
    assert away["excerpts"] == here["excerpts"]  # cut from the very same bytes
    for entry in away["excerpts"]:
        source = originals[entry["file"]]
        assert entry["sha256"] == hashlib.sha256(source).hexdigest()
        assert entry["text"].split("\n\n")[0] in source.decode("utf-8")
    assert not kb.exists()  # nothing fetched was written anywhere


def _object(society: Society, sha: str) -> Path:
    (found,) = [p for p in society.root.rglob(sha) if p.is_file()]
    return found


@pytest.mark.parametrize("fault", ["missing", "altered"])
def test_a_missing_or_altered_object_fails_the_step_naming_it_and_the_host(
    demo: Society, tmp_path: Path, fault: str
) -> None:
    kb = demo.root / "kb"
    candidates = _retrieved(demo, kb)[:1]
    sha = candidates[0]["sha256"]
    stored = _object(demo, sha)
    if fault == "missing":
        stored.unlink()
    else:
        stored.write_bytes(stored.read_bytes().replace(b"e", b"3", 1))
    shutil.move(kb, tmp_path / "kb-on-the-other-host")
    with pytest.raises(StepFailed) as failed:
        _excerpts(demo, kb, candidates)
    said = failed.value.message
    operator = demo.home.society.operator
    assert f"the knowledge-base file {candidates[0]['file']} (object {sha})" in said
    assert f"not on host {socket.gethostname()} where @{operator} runs (step excerpts)" in said
    assert ("no such object" if fault == "missing" else "was altered after it was stored") in said


def test_a_file_with_no_hash_and_no_knowledge_base_here_fails_loud(
    demo: Society, tmp_path: Path
) -> None:
    """A retriever that could not store (or an older one) names no hash: the excerpter with
    no knowledge base on its host says so, rather than flag every file as missing."""
    kb = demo.root / "kb"
    candidates = [{k: v for k, v in c.items() if k != "sha256"} for c in _retrieved(demo, kb)]
    shutil.move(kb, tmp_path / "kb-on-the-other-host")
    with pytest.raises(StepFailed) as failed:
        _excerpts(demo, kb, candidates)
    said = failed.value.message
    assert f"the knowledge base {kb.resolve()} is not on host {socket.gethostname()}" in said
    assert "names no SHA-256" in said


def test_a_pointed_anchor_is_judged_on_the_fetched_bytes_where_the_kb_is_not(
    demo: Society, tmp_path: Path
) -> None:
    """`confirm --anchor FILE` on a run whose @briefer has no knowledge base: the file, a
    direct hit the retriever handed on, is fetched by its hash and passes the same gates;
    a file the run did not hand on is refused by name, and no brief is written."""
    kb = demo.root / "kb"
    anchor = "voice-logs/2024-03-glue-up.md"
    (item,) = [c for c in _retrieved(demo, kb) if c["file"] == anchor]
    shutil.move(kb, tmp_path / "kb-on-the-other-host")
    ctx = step_context(demo.home, nick=demo.home.society.operator)
    context = {
        "kb": str(kb),
        "title": "Waiting Is Part of the Work",
        "keyword_primary": "patience",
        "slug": "waiting-is-part-of-the-work",
        "voice": "Carbon",
        "pattern": "Files that embody patience.",
        "briefs": str(demo.root / "briefs"),
    }
    hit = {"id": item["id"], "file": anchor, "why": "w", "sha256": item["sha256"]}
    data = {"context": context, "excerpts": [], "direct_hits": [hit], "anchor": anchor}
    done = asyncio.run(late_steps.assemble_brief(ask(data, to="briefer"), ctx)).data
    assert done["written"], done
    assert done["voice_anchor"].startswith(anchor)
    refused = {**data, "anchor": "voice-logs/2024-04-lime-mortar.md"}
    said = asyncio.run(late_steps.assemble_brief(ask(refused, to="briefer"), ctx)).data
    assert not said["written"]
    assert (
        "voice-logs/2024-04-lime-mortar.md is none of the files this run handed on"
        in (said["prompt"])
    )

"""The backpass's run artifacts through the room's object store (agents/backpass/artifacts.py),
against a real hub: handed on by one step, found where it is, fetched where it is not,
and a failure that names the file, the host and the store when it can be had neither way."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest

from agents.backpass.artifacts import arrive, hand_on
from agents.roots import Roots
from agents.runtime.step import StepContext
from room.errors import StepFailed
from tests.support import Society


async def _no_thread(thread: str, through: int) -> list[Any]:
    return []


def _ctx(society: Society, nick: str) -> StepContext:
    async def judge(*_: Any, **__: Any) -> Any:
        raise AssertionError("no model is asked here")

    return StepContext(nick, society.home, {}, judge, _no_thread)  # type: ignore[arg-type]


def test_an_artifact_is_handed_on_fetched_elsewhere_and_refused_when_gone(
    society: Society, tmp_path: Path
) -> None:
    society.start_hub()
    writer_runs, reader_runs = tmp_path / "host-b-runs", tmp_path / "host-a-runs"
    writer_runs.mkdir()
    reader_runs.mkdir()
    data = b'[{"text": "run the linter first", "quote": "lint"}]\n'

    async def run() -> None:
        # the operator's nick is privileged and proves itself: it may store objects
        operator = society.home.society.operator
        handed = await hand_on(
            _ctx(society, operator), "quotes", writer_runs / "items.json", data,
            Roots.single("runs", writer_runs), "items_file",
        )  # fmt: skip
        sha = handed["items_file_sha256"]
        assert sha == hashlib.sha256(data).hexdigest() and "items_file_problem" not in handed
        reader = Roots.single("runs", reader_runs)
        ctx = _ctx(society, operator)
        # Where the writer's path is readable with that hash: read there, nothing fetched.
        here = await arrive(ctx, "ledger", handed["items_file"], sha, reader_runs / "x.json",
                            Roots.single("runs", tmp_path))  # fmt: skip
        assert here == writer_runs / "items.json" and not (reader_runs / "x.json").exists()
        # On "another host" (a runs root that cannot reach the writer's file): fetched.
        local = await arrive(ctx, "ledger", handed["items_file"], sha,
                             reader_runs / "items.json", reader)  # fmt: skip
        assert local == reader_runs / "items.json" and local.read_bytes() == data
        # A name the store does not hold, and no file: a loud failure naming what and where.
        gone = hashlib.sha256(b"never stored").hexdigest()
        with pytest.raises(StepFailed) as failed:
            await arrive(ctx, "ledger", str(writer_runs / "gone.json"), gone,
                         reader_runs / "gone.json", reader, "the store was full")  # fmt: skip
        said = failed.value.message
        assert f"the run artifact {writer_runs / 'gone.json'} is not on host" in said
        assert gone in said and "the step that wrote it said: the store was full" in said
        assert not (reader_runs / "gone.json").exists()

    asyncio.run(run())

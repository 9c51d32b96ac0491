"""A recall query is the writer's input: its cost is bounded (terms, prefix terms, characters,
a deadline), and a bad one is the writer's error, said as such, through the CLI (exit 2), an
ask to the real librarian lurker (a FAILED reply) and the MCP tool; never "the memory index
could not be read"."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from agents.memory.entry import Save
from agents.memory.index import Index
from agents.memory.namespaces import index_path
from tests.mcp.helpers import failed, in_memory
from tests.memory.helpers import post, save, saved_id, wait_reply
from tests.support import Society, run_cli

LETTERS = "abcdefghijklmnopqrstuvwxyz"
# the attack: 1,040 two-letter prefix terms (16 s on the reporter's index)
HUGE = " OR ".join([a + b + "*" for a, b in itertools.product(LETTERS, LETTERS)][:1040])
UNREADABLE = "could not be read"


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("*", "needs at least 2 letters"),
        ("deploy OR b*", "needs at least 2 letters"),
        ("deploy AND", "not valid FTS5 syntax"),
        ('"open', "not valid FTS5 syntax"),
        ("host:alpha", "not valid FTS5 syntax"),
        ("NEAR(a b, x)", "not valid FTS5 syntax"),
        (HUGE, "holds at most"),
        (" ".join(f"w{n}" for n in range(40)), "at most 32"),
        ("a* OR b* OR c* OR d* OR e*", "at most 4"),
    ],
)
def test_the_cli_says_a_bad_query_is_the_users_error(hall: Society, query: str, said: str) -> None:
    """`bullpen memory recall QUERY`: exit 2, what was wrong and how to write it."""
    started = time.monotonic()
    done = run_cli(hall.root, "memory", "recall", query)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert said in done.stderr and UNREADABLE not in done.stderr
    assert "Traceback" not in done.stderr
    if "FTS5" in said or said == "needs at least 2 letters":
        assert 'deploy OR "build host"' in done.stderr  # how to write one
    assert time.monotonic() - started < 30


def test_the_librarian_refuses_costly_asks_and_a_save_behind_them_is_not_held(
    hall: Society,
) -> None:
    """Three asks with the 1,040-term prefix query, then a save: each ask gets a FAILED reply
    naming the bound, `*` one saying how to write a prefix, and the save is answered at once."""
    asks = [post(hall, "@librarian", "look up", data={"query": HUGE}) for _ in range(3)]
    star = post(hall, "@librarian", "look up", data={"query": "*"})
    started = time.monotonic()
    saved = saved_id(save(hall, "/bullpen/ops", "shearwater fact after the costly asks"))
    took = time.monotonic() - started
    for ask in asks:
        reply = wait_reply(hall, ask["id"])
        assert reply["data"]["failed"] is True and "holds at most" in reply["body"]
    reply = wait_reply(hall, star["id"])
    assert reply["data"]["failed"] is True and "needs at least 2 letters" in reply["body"]
    assert UNREADABLE not in reply["body"]
    assert saved.startswith("m") and took < 10, took


def test_the_mcp_recall_tool_says_so_too(hall: Society) -> None:
    """The MCP `recall` tool: a tool error with the same words."""

    async def scenario() -> None:
        async with in_memory(hall.root, "stepper") as client:
            said = failed(await client.call_tool("recall", {"query": "*"}))
            assert "needs at least 2 letters" in said and UNREADABLE not in said
            said = failed(await client.call_tool("recall", {"query": HUGE}))
            assert "holds at most" in said

    asyncio.run(scenario())


def test_a_query_past_its_deadline_is_stopped_and_said(tmp_path: Path) -> None:
    """`[memory] query_deadline_s`: a query within the bounds that runs longer is stopped by
    SQLite and reported as the query's cost (exit 2); the index still answers afterwards."""
    society = Society(tmp_path / "home")
    path = society.root / "society.toml"
    text = path.read_text()
    path.write_text(
        text.replace(
            "\n[memory.namespaces]\n",
            "\n[memory]\nquery_deadline_s = 0.001\n\n[memory.namespaces]\n",
        )
    )

    words = ["".join(p) for p in itertools.product(LETTERS, repeat=3)][:6000]
    with Index.open(index_path(society.home)) as index, index.writing():
        for seq in range(1, 6001):
            entry = " ".join(words[(seq * 7 + n) % len(words)] for n in range(30))
            save_ = Save(ns="/bullpen/ops", text=entry)
            index.add(seq, f"id{seq}", "operator", "t", save_, "/bullpen/ops")
    done = run_cli(society.root, "memory", "recall", "aa* OR ab* OR ac* OR ad*", "-k", "100")
    assert done.returncode == 2, (done.stdout[:300], done.stderr)
    assert "ran longer than 0.001 s and was stopped" in done.stderr
    assert UNREADABLE not in done.stderr
    path.write_text(text)  # the default deadline: the same query answers
    again = run_cli(society.root, "memory", "recall", "aa* OR ab* OR ac* OR ad*", "--json")
    assert again.returncode == 0, again.stderr

"""`bullpen mcp`'s recall and remember tools: the librarian's rules through the SDK's client."""

from __future__ import annotations

import asyncio

from tests.mcp.helpers import failed, in_memory, ok
from tests.support import Society


def test_remember_then_recall_through_mcp(hall: Society) -> None:
    """remember saves through the room (the librarian answers with the id); recall finds it."""

    async def scenario() -> None:
        async with in_memory(hall.root, "stepper") as client:
            saved = ok(
                await client.call_tool(
                    "remember", {"ns": "/bullpen/research", "text": "cormorant dives deep"}
                )
            )
            assert saved["saved"].startswith("m") and saved["ns"] == "/bullpen/research"
            found = ok(await client.call_tool("recall", {"query": "cormorant"}))
            assert [e["id"] for e in found["results"]] == [saved["saved"]]
            assert found["results"][0]["saved_by"] == "stepper"

    asyncio.run(scenario())


def test_bad_input_is_a_tool_error_and_posts_nothing(hall: Society) -> None:
    """No or undeclared ns, an empty text, an FTS5 syntax error: tool errors that say why."""

    async def scenario() -> None:
        before = len(hall.lines())
        async with in_memory(hall.root, "stepper") as client:
            assert "no namespace" in failed(
                await client.call_tool("remember", {"ns": "", "text": "x"})
            )
            assert "not declared" in failed(
                await client.call_tool("remember", {"ns": "/bullpen/else", "text": "x"})
            )
            assert "empty" in failed(
                await client.call_tool("remember", {"ns": "/bullpen/ops", "text": " "})
            )
            assert "FTS5" in failed(await client.call_tool("recall", {"query": "dive("}))
            assert "outside /bullpen" in failed(
                await client.call_tool("recall", {"query": "dive", "ns": "/etc"})
            )
        assert len(hall.lines()) == before

    asyncio.run(scenario())

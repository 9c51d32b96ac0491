"""The memory tools of `bullpen mcp`: recall and remember, with the librarian's rules.

`recall` reads the home's index (read-only, like `bullpen memory recall`);
`remember` saves through the room as the server's nick, addressed to
@librarian, so a save by a nick that is not trusted or not verified is
refused exactly as any other post would be. Bad input (no namespace, an
undeclared one, an empty or oversized text, an FTS5 syntax error) is a tool
error saying what to fix; nothing is posted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from agents.librarian.client import ask_librarian, checked_save
from agents.memory.index import Index
from agents.memory.namespaces import ROOT, index_path, normalize
from room.errors import BullpenError

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp.server import MCPServer

    from agents.home import Home
    from room.client import RoomClient

__all__ = ["add_memory_tools"]


def add_memory_tools(
    server: MCPServer, home: Home, connect: Callable[[], tuple[RoomClient, Any]]
) -> None:
    """Add recall and remember; `connect` is the server's own way into the room (its nick's
    client and proof), so a save is posted exactly as room_say would post it."""

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def recall(
        query: Annotated[str, Field(description='words to look up (FTS5 syntax: AND, OR, "…")')],
        ns: Annotated[
            str, Field(description="a namespace prefix, whole segments: /bullpen/ops")
        ] = ROOT,
        k: Annotated[int, Field(ge=1, le=100, description="at most this many entries")] = 5,
    ) -> dict[str, Any]:
        """Shared memory's best entries for a query, newest correction only, with provenance.

        The manual-lookup namespaces (/bullpen/sandbox, /bullpen/ops, /bullpen/research,
        /bullpen/artifacts) reach you only this way: the default ns /bullpen sees them all.
        """
        try:
            index = Index.open(index_path(home), create=False)
            try:
                found = index.recall(query, normalize(ns), k)
            finally:
                index.close()
        except BullpenError as exc:
            raise ToolError(exc.message) from None
        return {"ns": normalize(ns), "results": [entry.to_dict() for entry in found]}

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def remember(
        ns: Annotated[str, Field(description="a declared namespace, e.g. /bullpen/ops; required")],
        text: Annotated[str, Field(description="what the entry records (at most 16 KiB)")],
        source: Annotated[
            str | None, Field(description="where it comes from: a trace sha256, a commit, a run")
        ] = None,
        supersedes: Annotated[
            str | None, Field(description="the id of the entry this corrects, e.g. m41")
        ] = None,
    ) -> dict[str, Any]:
        """Save an entry to shared memory through the room (@librarian answers with its id)."""
        save: dict[str, Any] = {"ns": ns, "text": text}
        if source:
            save["source"] = source
        if supersedes:
            save["supersedes"] = supersedes
        client, _ = connect()
        try:
            body = checked_save(home, save)
            async with client:
                line = await ask_librarian(
                    home, client, f"remember: {body['text'][:200]}", {"save": body}
                )
        except BullpenError as exc:
            raise ToolError(exc.message) from None
        return {"saved": line["data"]["saved"], "ns": line["data"]["ns"], "reply": line["body"]}

"""A small MCP-speaking agent, as a lurker's `mcp_agent` runs one in the tests.

    python agent.py MODE [PROMPT]

It reads its MCP client configuration from $BULLPEN_MCP_CONFIG, starts the
server named there ("bullpen": `bullpen mcp --as NICK`) with the SDK's stdio
client, finds the message id in its prompt (the argument, or stdin when
there is none), reads that message with room_read and acts by MODE:

    reply            answer it with room_say: "agent did: <body>"
    silent           exit 0 without answering
    fail             exit 3 without answering
    hang             never answer; sleep until stopped
    reply-then-hang  answer, then sleep until stopped

With $AGENT_MARKER set it writes its pid there once the server is up.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters


def prompt_text() -> str:
    return sys.argv[2] if len(sys.argv) > 2 else sys.stdin.read()


def server_parameters() -> StdioServerParameters:
    config = json.loads(Path(os.environ["BULLPEN_MCP_CONFIG"]).read_text(encoding="utf-8"))
    entry = config["mcpServers"]["bullpen"]
    return StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"])


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise SystemExit(f"agent: {tool} failed: {result.content}")
    assert result.structured_content is not None
    return result.structured_content


async def main() -> int:
    mode = sys.argv[1]
    prompt = prompt_text()
    args = json.loads(re.search(r'^\{"to": .*\}$', prompt, re.M).group(0))  # type: ignore[union-attr]
    nick = os.environ["BULLPEN_NICK"]
    async with Client(server_parameters()) as client:
        if marker := os.environ.get("AGENT_MARKER"):
            with open(marker, "w", encoding="utf-8") as f:
                f.write(str(os.getpid()))
        seen = await call(client, "room_read", {"to": f"@{nick}", "limit": 1000})
        asked = next(m for m in seen["messages"] if m["id"] == args["in_reply_to"])
        if mode in ("reply", "reply-then-hang"):
            await call(
                client,
                "room_say",
                {
                    **args,
                    "body": f"agent did: {asked['body']}",
                    "data": {"asked_seq": asked["seq"]},
                },
            )
        if mode in ("hang", "reply-then-hang"):
            await asyncio.sleep(3600)
    return 3 if mode == "fail" else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

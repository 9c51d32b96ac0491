"""The room's MCP tools, through the SDK's in-memory client and a real stdio subprocess.

Every test talks to a real hub: a post made through MCP passes the same gate as
a post made with `bullpen say`, and the hub's refusals reach the tool caller.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import pytest
from mcp import Client

from tests.mcp.helpers import (
    failed,
    head,
    in_memory,
    ok,
    server_args,
    stdio_parameters,
)
from tests.support import HTTP, REPO, Society, run_cli, wait_for


def waiting_readers(room: Society) -> int:
    return int(HTTP.get(f"{room.strict_url}/health", timeout=5).json()["readers_waiting"])


TOOLS = {"room_say", "room_read", "room_thread", "recall", "remember"}


class TestInMemory:
    @pytest.mark.parametrize("mode", ["legacy", "auto"])
    def test_say_read_thread_round_trip(self, room: Society, mode: str) -> None:
        """A post comes back as the stored line; room_read and room_thread find it."""
        thread = f"rt-{mode}"

        async def scenario() -> None:
            async with in_memory(room.root, "operator", mode=mode) as client:
                listed = {tool.name: tool for tool in (await client.list_tools()).tools}
                assert set(listed) == TOOLS
                # the caller cannot choose who it speaks as
                assert "from" not in listed["room_say"].input_schema["properties"]
                stored = ok(
                    await client.call_tool(
                        "room_say",
                        {
                            "to": "echo",
                            "body": "hello from MCP",
                            "type": "ask",
                            "data": {"n": 1},
                            "thread": thread,
                        },
                    )
                )
                assert stored["from"] == "operator" and stored["to"] == "@echo"
                assert stored["type"] == "ask" and stored["data"] == {"n": 1}
                assert stored["verified"] is True and stored["seq"] >= 1
                answer = ok(
                    await client.call_tool(
                        "room_say",
                        {
                            "to": "@echo",
                            "body": "second",
                            "in_reply_to": stored["id"],
                            "thread": thread,
                        },
                    )
                )
                read = ok(
                    await client.call_tool(
                        "room_read", {"after": stored["seq"] - 1, "thread": thread}
                    )
                )
                assert [m["id"] for m in read["messages"]] == [stored["id"], answer["id"]]
                assert read["last_seq"] >= answer["seq"]
                whole = ok(await client.call_tool("room_thread", {"thread": thread}))
                assert [m["body"] for m in whole["messages"]] == ["hello from MCP", "second"]
                assert whole["messages"][1]["in_reply_to"] == stored["id"]
                assert whole["truncated"] is False

        asyncio.run(scenario())
        on_disk = [line for line in room.lines() if line.get("thread") == thread]
        assert [line["body"] for line in on_disk] == ["hello from MCP", "second"]

    def test_read_filters_and_long_polls(self, room: Society) -> None:
        """`to` filters by addressee; `wait` returns as soon as a matching line lands."""

        async def scenario() -> None:
            async with in_memory(room.root, "operator") as client:
                start = ok(await client.call_tool("room_read", {"limit": 1}))["last_seq"]
                after = max(start, head(room))
                waiting = asyncio.ensure_future(
                    client.call_tool("room_read", {"after": after, "to": "@poll", "wait": 20})
                )
                await asyncio.sleep(0.3)
                assert not waiting.done()
                began = time.monotonic()
                ok(await client.call_tool("room_say", {"to": "@other", "body": "not for poll"}))
                ok(await client.call_tool("room_say", {"to": "@poll", "body": "for poll"}))
                got = ok(await waiting)
                assert time.monotonic() - began < 10
                assert [m["body"] for m in got["messages"]] == ["for poll"]

        asyncio.run(scenario())

    def test_read_past_the_head_never_returns_a_line_at_or_below_after(self, room: Society) -> None:
        """`room_read` with `after` far beyond the head waits out its time (issue 33): a line
        posted meanwhile lands at the head + 1, far below `after`, and is not returned."""

        async def scenario() -> None:
            async with in_memory(room.root, "operator") as client:
                beyond = head(room) + 1_000_000_000
                began = time.monotonic()
                waiting = asyncio.ensure_future(
                    client.call_tool("room_read", {"after": beyond, "wait": 3})
                )
                await asyncio.to_thread(wait_for, lambda: waiting_readers(room) == 1, 10, "a wait")
                stored = ok(await client.call_tool("room_say", {"to": "@other", "body": "mid"}))
                got = ok(await waiting)
                assert stored["seq"] < beyond
                assert got["messages"] == [], got
                assert time.monotonic() - began >= 2.5

        asyncio.run(scenario())

    def test_bad_arguments_are_tool_errors_and_the_server_keeps_serving(
        self, room: Society
    ) -> None:
        """Each bad call is a tool error naming the problem; nothing is written; then a good call works."""
        bad: list[tuple[str, dict[str, Any], str]] = [
            ("room_say", {"to": "@echo"}, "body"),
            ("room_say", {"to": "@echo", "body": "x", "type": "shout"}, "type"),
            ("room_say", {"to": "Not A Nick", "body": "x"}, "is not a nick"),
            ("room_say", {"to": "@echo", "body": "x", "data": [1, 2]}, "data"),
            ("room_say", {"to": "@echo", "body": "x" * (65 * 1024)}, "over 64 KiB"),
            ("room_say", {"to": "@echo", "body": "x", "in_reply_to": "no spaces!"}, "in_reply_to"),
            ("room_say", {"to": "@echo", "body": "x", "from": "foreman"}, "from"),
            ("room_read", {"limit": 0}, "limit"),
            ("room_read", {"wait": 1000}, "wait"),
            ("room_read", {"after": -1}, "after"),
            ("room_read", {"to": "BAD"}, "is not a nick"),
            ("room_thread", {}, "thread"),
            ("room_thread", {"thread": ""}, "thread"),
            ("room_shout", {}, "room_shout"),
        ]

        async def scenario() -> None:
            async with in_memory(room.root, "operator") as client:
                before = head(room)
                for tool, arguments, mention in bad:
                    message = failed(await client.call_tool(tool, arguments))
                    assert mention in message, (tool, arguments, message)
                assert head(room) == before  # nothing was written
                stored = ok(await client.call_tool("room_say", {"to": "@echo", "body": "fine"}))
                assert stored["seq"] == before + 1

        asyncio.run(scenario())

    def test_the_long_poll_ends_before_the_clients_timeout(self, room: Society) -> None:
        """room_read's `wait` is capped at 50 s, under the TypeScript SDK's 60 s request timeout."""

        async def scenario() -> None:
            async with in_memory(room.root, "operator") as client:
                listed = {tool.name: tool for tool in (await client.list_tools()).tools}
                wait = listed["room_read"].input_schema["properties"]["wait"]
                assert wait["maximum"] == 50
                started = time.monotonic()
                message = failed(await client.call_tool("room_read", {"wait": 55}))
                assert "wait" in message
                assert time.monotonic() - started < 10  # refused at once, not after 55 s

        asyncio.run(scenario())

    def test_an_unreachable_hub_is_a_tool_error(self, society: Society) -> None:
        """With no hub running, a read fails as a tool error that says to start the hub."""

        async def scenario() -> str:
            async with in_memory(society.root, "operator") as client:
                return failed(await client.call_tool("room_read", {}))

        assert "is it running?" in asyncio.run(scenario())


def _say_cli(room: Society, nick: str, relaxed: bool, body: str) -> dict[str, Any]:
    args = ["say", "@echo", body, "--as", nick, *(["--relaxed"] if relaxed else [])]
    done = run_cli(room.root, *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _say_mcp(room: Society, nick: str, relaxed: bool, body: str) -> dict[str, Any]:
    async def scenario() -> dict[str, Any]:
        async with in_memory(room.root, nick, relaxed=relaxed) as client:
            return ok(await client.call_tool("room_say", {"to": "@echo", "body": body}))

    return asyncio.run(scenario())


class TestTheGateDecides:
    @pytest.mark.parametrize(
        ("nick", "relaxed", "verified"),
        [
            ("operator", False, True),  # privileged, proves with the shared secret
            ("signer", False, True),  # privileged, proves with its own key
            ("stranger", False, False),  # not privileged: written unverified
            ("operator", True, True),  # privileged, relaxed listener with its token
            ("stranger", True, False),  # not privileged, relaxed: still unverified
        ],
    )
    def test_verified_exactly_when_bullpen_say_is(
        self, room: Society, nick: str, relaxed: bool, verified: bool
    ) -> None:
        """The same nick and listener give the same `verified` through MCP as through `bullpen say`."""
        by_cli = _say_cli(room, nick, relaxed, f"cli {nick} {relaxed}")
        by_mcp = _say_mcp(room, nick, relaxed, f"mcp {nick} {relaxed}")
        assert by_cli["from"] == by_mcp["from"] == nick
        assert by_cli["verified"] is by_mcp["verified"] is verified
        # a nick with its own key signs: the signature stays in the line either way
        assert (by_cli["sig"] is not None) is (by_mcp["sig"] is not None) is (nick == "signer")

    def test_a_privileged_nick_without_its_proof_is_refused_by_the_hub(self, room: Society) -> None:
        """No private key here for a privileged nick: the hub's 401 reaches the caller, with why."""

        async def scenario() -> str:
            async with in_memory(room.root, "keyless") as client:
                return failed(
                    await client.call_tool("room_say", {"to": "@echo", "body": "let me in"})
                )

        before = head(room)
        message = asyncio.run(scenario())
        assert "the hub refused the post (HTTP 401)" in message
        assert "keyless is privileged: its posts to this listener must carry a proof" in message
        assert "this server holds no proof for keyless" in message
        assert "keyless.key does not exist" in message
        assert "`bullpen keys new keyless`" in message and "bullpen init" not in message
        assert head(room) == before

    def test_relaxed_without_its_token_is_refused_by_the_hub(self, room: Society) -> None:
        """The relaxed listener's token cannot be read: the hub's 401 reaches the caller."""
        token_file = room.root / "secrets" / "relaxed-token"

        async def scenario() -> str:
            async with in_memory(room.root, "operator", relaxed=True) as client:
                return failed(await client.call_tool("room_say", {"to": "@echo", "body": "hi"}))

        before = head(room)
        token_file.chmod(0o644)  # the hub read it at start; this server refuses a loose secret
        try:
            message = asyncio.run(scenario())
        finally:
            token_file.chmod(0o600)
        assert "the relaxed listener needs 'Authorization: Bearer <token>'" in message
        assert "readable by group or others" in message
        assert head(room) == before


class TestStdio:
    def test_tools_over_a_real_stdio_subprocess(self, room: Society) -> None:
        """`python -m agents.cli --home H mcp --as NICK` serves the tools; bad calls do not stop it."""

        async def scenario() -> dict[str, Any]:
            async with Client(stdio_parameters(room.root, "operator")) as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                assert "room_read" in failed(await client.call_tool("room_read", {"limit": -5}))
                assert "is not a nick" in failed(
                    await client.call_tool("room_say", {"to": "NOPE", "body": "x"})
                )
                stored = ok(
                    await client.call_tool(
                        "room_say", {"to": "@echo", "body": "over stdio", "thread": "stdio-1"}
                    )
                )
                whole = ok(await client.call_tool("room_thread", {"thread": "stdio-1"}))
                assert [m["id"] for m in whole["messages"]] == [stored["id"]]
                return stored

        stored = asyncio.run(scenario())
        assert stored["verified"] is True and stored["from"] == "operator"
        assert stored in room.lines()

    def test_refusal_passes_through_stdio(self, room: Society) -> None:
        """A server that cannot prove its privileged nick still serves, and relays the hub's 401."""

        async def scenario() -> str:
            async with Client(stdio_parameters(room.root, "keyless")) as client:
                return failed(await client.call_tool("room_say", {"to": "@echo", "body": "x"}))

        message = asyncio.run(scenario())
        assert "keyless is privileged: its posts to this listener must carry a proof" in message

    def test_stdout_carries_only_the_protocol(self, room: Society) -> None:
        """Every stdout line is a JSON-RPC message; logs go to stderr; no secret in either."""
        requests: list[dict[str, Any]] = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw-test", "version": "0"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "room_say", "arguments": {"to": "@echo"}},
            },
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "room_say", "arguments": {"to": "@echo", "body": "raw"}},
            },
        ]
        proc = subprocess.Popen(
            [sys.executable, *server_args(room.root, "operator")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
        )
        answers: dict[int, dict[str, Any]] = {}
        lines: list[bytes] = []
        try:
            assert proc.stdin is not None and proc.stdout is not None
            for request in requests:
                proc.stdin.write(json.dumps(request).encode() + b"\n")
                proc.stdin.flush()
                if "id" in request:
                    line = proc.stdout.readline()
                    lines.append(line)
                    answer = json.loads(line)
                    answers[answer["id"]] = answer
            rest, err = proc.communicate(timeout=30)  # closes stdin: the server sees EOF
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        assert proc.returncode == 0, err.decode()
        lines += [line for line in rest.split(b"\n") if line]
        for line in lines:
            assert json.loads(line)["jsonrpc"] == "2.0", line
        assert answers[1]["result"]["serverInfo"]["name"] == "bullpen"
        assert answers[2]["result"]["isError"] is True
        assert answers[3]["result"]["structuredContent"]["verified"] is True
        assert b"serving the room over MCP stdio" in err
        for secret in (room.secret(), room.token().encode()):
            assert secret not in rest and secret not in err and all(secret not in x for x in lines)

    def test_a_bad_nick_stops_the_command_with_a_configuration_error(self, room: Society) -> None:
        """`--as` must be a nick: exit 78 and a message that says what a nick looks like."""
        done = run_cli(room.root, "mcp", "--as", "Not-A-Nick")
        assert done.returncode == 78
        assert "is not a nick" in done.stderr and done.stdout == ""

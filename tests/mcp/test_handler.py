"""The MCP agent handler kind: a real hub, real lurkers, and a small MCP agent of our own.

The agent (tests/mcp/agent.py) is an MCP client built on the SDK's stdio client:
it starts `bullpen mcp --as NICK` from the configuration the lurker generated,
reads the message, and replies with room_say — or misbehaves, by its mode.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.home import Home
from agents.mcp.handler import (
    McpAgentHandler,
    client_config,
    fill,
    render_prompt,
)
from agents.runtime.outcome import Failure, Outbox
from agents.runtime.step import StepContext
from room.message import Message
from tests.mcp.helpers import AGENT, ask
from tests.support import Society, add_nick, pid_alive, wait_for

STEP = "agents.mcp.handler:agent_step"
# The hanging agents' timeout: it must outlast an agent's start (two Python programs that load
# the MCP SDK: itself and its `bullpen mcp` server) on a loaded 2-core machine, where 8 s once
# ran out before the lingering agent had replied.
AGENT_START_S = 15


def agent(mode: str, *, prompt_in_argv: bool = True) -> list[str]:
    return [sys.executable, str(AGENT), mode, *(["{prompt}"] if prompt_in_argv else [])]


def replies_to(society: Society, ask_id: str) -> list[dict[str, Any]]:
    return [m for m in society.lines() if m.get("in_reply_to") == ask_id]


def wait_reply(society: Society, ask_id: str, timeout: float = 40) -> dict[str, Any]:
    def first() -> dict[str, Any] | None:
        found = replies_to(society, ask_id)
        return found[0] if found else None

    return wait_for(first, timeout, f"a reply to {ask_id}")  # type: ignore[no-any-return]


def handled(society: Society, nick: str, ask_id: str, event: str) -> bool:
    """The lurker logged `event` for this message: its handling is over."""
    log = society.root / "test-logs" / f"lurk-{nick}.log"
    for line in log.read_text(errors="replace").splitlines():
        if event in line and ask_id in line:
            return True
    return False


def servers_for(root: Path, nick: str) -> list[int]:
    """Live `bullpen mcp --as NICK` processes of this home."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ours = str(root).encode() in argv and b"mcp" in argv and nick.encode() in argv
        if ours and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


class TestPrompt:
    def message(self, **fields: Any) -> Message:
        base = {
            "seq": 7,
            "id": "01ABC",
            "ts": "t",
            "from": "foreman",
            "to": "@coder",
            "type": "ask",
            "body": "fix {id} and $1 \\1",
            "thread": "exp-7",
            "verified": True,
        }
        return Message.model_validate({**base, **fields})

    def test_substitution_is_literal_and_single_pass(self) -> None:
        """A value holding `{id}`, `$1` or `\\1` stays as it is; unknown braces are left alone."""
        assert fill("{a}-{b}-{c}", {"a": "{b}", "b": "$1 \\1"}) == "{b}-$1 \\1-{c}"

    def test_prompt_names_the_reply_call(self) -> None:
        """The prompt holds the body verbatim and the exact room_say arguments that answer it."""
        prompt = render_prompt(self.message(data={"k": [1]}), "coder")
        assert "fix {id} and $1 \\1" in prompt
        assert '"k": [' in prompt
        arguments = {"to": "@foreman", "type": "reply", "in_reply_to": "01ABC", "thread": "exp-7"}
        assert json.dumps(arguments) in prompt.splitlines()
        unthreaded = render_prompt(self.message(thread=None), "coder")
        assert '"thread"' not in unthreaded and "thread (none)" in unthreaded

    def test_custom_template(self) -> None:
        prompt = render_prompt(self.message(), "coder", "{sender} asks {nick}: {body}")
        assert prompt == "foreman asks coder: fix {id} and $1 \\1"

    def test_client_config_starts_bullpen_mcp_as_the_nick(self, tmp_path: Path) -> None:
        """The generated configuration names one server: this home's room, as this nick."""
        entry = client_config(Home(tmp_path), "coder", relaxed=False)["mcpServers"]["bullpen"]
        assert entry["command"] == sys.executable
        assert entry["args"] == [
            "-m",
            "agents.cli",
            "--home",
            str(tmp_path),
            "mcp",
            "--as",
            "coder",
            "--no-relaxed",
        ]
        assert entry["env"] == {}


@pytest.fixture(scope="module")
def lurkers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Society]:
    """A hub and one lurker per agent behaviour, each running agents.mcp.handler:agent_step."""
    made = Society(Path(tmp_path_factory.mktemp("mcp-lurk")) / "home")
    marker = made.root / "hanger.pid"
    nicks: dict[str, dict[str, Any]] = {
        "coder": {"options": {"mcp_agent": agent("reply")}, "timeout_s": 60},
        "mute": {"options": {"mcp_agent": agent("silent")}, "timeout_s": 60},
        "crasher": {"options": {"mcp_agent": agent("fail")}, "timeout_s": 60},
        "hanger": {
            "options": {"mcp_agent": agent("hang")},
            "timeout_s": AGENT_START_S,
            "env": {"AGENT_MARKER": str(marker)},
        },
        "lingerer": {
            "options": {"mcp_agent": agent("reply-then-hang")},
            "timeout_s": AGENT_START_S,
        },
    }
    for nick, config in nicks.items():
        add_nick(made.root, nick, handler=STEP, **config)
    try:
        made.start_hub()
        for nick in nicks:
            made.start_lurker(nick)
        yield made
    finally:
        made.stop_all()


class TestLurkerRunsTheAgent:
    def test_an_ask_gets_the_agents_verified_reply_through_mcp(self, lurkers: Society) -> None:
        """The agent's own room_say is the reply: verified, addressed, threaded; nothing else."""
        question = ask(lurkers, "@coder", "add the tests", thread="run-1", data={"n": 2})
        reply = wait_reply(lurkers, question["id"])
        assert reply["from"] == "coder" and reply["to"] == "@operator"
        assert reply["type"] == "reply" and reply["thread"] == "run-1"
        assert reply["verified"] is True
        assert reply["body"] == "agent did: add the tests"
        assert reply["data"] == {"asked_seq": question["seq"]}
        wait_for(
            lambda: handled(lurkers, "coder", question["id"], "the agent replied through MCP"),
            20,
            "the lurker to finish the message",
        )
        assert replies_to(lurkers, question["id"]) == [reply]  # the lurker added no post

    @pytest.mark.parametrize(
        ("nick", "reason", "exit_code"),
        [
            ("mute", "exited without replying: it must call room_say", 0),
            ("crasher", "exited with status 3 without replying", 3),
        ],
    )
    def test_an_agent_that_does_not_reply_gets_a_failed_reply(
        self, lurkers: Society, nick: str, reason: str, exit_code: int
    ) -> None:
        """No room_say from the agent: the lurker replies [NICK FAILED — why]; never silence."""
        question = ask(lurkers, f"@{nick}", "do something")
        reply = wait_reply(lurkers, question["id"])
        assert reply["from"] == nick and reply["verified"] is True
        assert reply["body"].startswith(f"[{nick} FAILED — ") and reason in reply["body"]
        assert question["id"] in reply["body"] or exit_code != 0
        assert reply["data"]["failed"] is True and reply["data"]["exit_code"] == exit_code
        assert len(replies_to(lurkers, question["id"])) == 1

    def test_a_hung_agent_is_stopped_with_its_whole_process_group(self, lurkers: Society) -> None:
        """Past the timeout the agent and its MCP server are stopped, and the reply says so."""
        marker = lurkers.root / "hanger.pid"
        question = ask(lurkers, "@hanger", "never finishes")
        wait_for(marker.exists, 30, "the hanging agent to connect to its MCP server")
        pid = int(marker.read_text())
        assert servers_for(lurkers.root, "hanger"), "its `bullpen mcp` server should be running"
        reply = wait_reply(lurkers, question["id"])
        assert reply["body"].startswith("[hanger FAILED — timed out after ")
        assert reply["data"]["timeout_s"] > 0
        wait_for(lambda: not pid_alive(pid), 10, "the agent to be gone")
        wait_for(lambda: not servers_for(lurkers.root, "hanger"), 10, "its MCP server to be gone")

    @pytest.mark.long
    def test_an_agent_that_replied_and_then_hung_is_not_flagged(self, lurkers: Society) -> None:
        """The reply is in the room before the timeout: stop the agent, post nothing more."""
        question = ask(lurkers, "@lingerer", "answer, then linger")
        reply = wait_reply(lurkers, question["id"])
        assert reply["body"] == "agent did: answer, then linger"
        wait_for(
            lambda: handled(lurkers, "lingerer", question["id"], "the agent replied through MCP"),
            30,
            "the lurker to stop the lingering agent",
        )
        assert replies_to(lurkers, question["id"]) == [reply]
        assert not servers_for(lurkers.root, "lingerer")


def _context(home: Home, nick: str) -> StepContext:
    async def unused(*args: Any) -> Any:
        raise AssertionError("the MCP handler does not use this")

    return StepContext(nick=nick, home=home, options={}, judge=unused, read_thread=unused)  # type: ignore[arg-type]


class TestHandlerKind:
    """McpAgentHandler, the `mcp_agent` kind, run directly against a real hub."""

    def test_prompt_on_stdin_and_reply(self, society: Society) -> None:
        """With no {prompt} in the argv the prompt goes to stdin; the agent's reply means no post."""
        add_nick(society.root, "coder", handler="agents.examples:echo")
        society.start_hub()
        question = Message.model_validate(ask(society, "@coder", "via stdin"))
        handler = McpAgentHandler(agent("reply", prompt_in_argv=False))
        outcome = asyncio.run(handler.run(question, _context(society.home, "coder"), 60))
        assert outcome == Outbox([])
        [reply] = replies_to(society, question.id)
        assert reply["body"] == "agent did: via stdin" and reply["verified"] is True

    def test_silence_and_a_missing_program_are_failures(self, society: Society) -> None:
        add_nick(society.root, "coder", handler="agents.examples:echo")
        society.start_hub()
        question = Message.model_validate(ask(society, "@coder", "anything"))
        ctx = _context(society.home, "coder")
        silent = asyncio.run(McpAgentHandler(agent("silent")).run(question, ctx, 60))
        assert isinstance(silent, Failure) and "exited without replying" in silent.reason
        missing = McpAgentHandler(["/nonexistent/agent", "{prompt}"])
        outcome = asyncio.run(missing.run(question, ctx, 60))
        assert isinstance(outcome, Failure) and "cannot start the agent" in outcome.reason
        assert replies_to(society, question.id) == []  # the lurker, not the handler, posts

    def test_the_output_tail_never_carries_the_homes_secrets(self, society: Society) -> None:
        """An agent that prints the shared secret and the token: both are cut from the tail."""
        add_nick(society.root, "coder", handler="agents.examples:echo")
        society.start_hub()
        question = Message.model_validate(ask(society, "@coder", "leak"))
        secrets = society.root / "secrets"
        leaky = McpAgentHandler(
            ["sh", "-c", f"cat {secrets}/post-secret; echo; cat {secrets}/relaxed-token >&2"]
        )
        outcome = asyncio.run(leaky.run(question, _context(society.home, "coder"), 60))
        assert isinstance(outcome, Failure)
        out, err = outcome.details["stdout"], outcome.details["stderr"]
        assert "<redacted>" in out and "<redacted>" in err
        for secret in (society.secret().decode(), society.token()):
            assert secret not in out and secret not in err


def test_the_mcp_agent_key_end_to_end(society: Society) -> None:
    """`mcp_agent = [...]` under [nicks.X]: the lurker loads the handler kind itself."""
    add_nick(society.root, "native", mcp_agent=agent("reply"), timeout_s=60)
    add_nick(society.root, "quiet", mcp_agent=agent("silent"), timeout_s=60)
    society.start_hub()
    society.start_lurker("native")
    society.start_lurker("quiet")
    answered = ask(society, "@native", "natively")
    unanswered = ask(society, "@quiet", "say nothing")
    reply = wait_reply(society, answered["id"])
    assert reply["body"] == "agent did: natively" and reply["verified"] is True
    flag = wait_reply(society, unanswered["id"])
    assert flag["body"].startswith("[quiet FAILED — ") and flag["verified"] is True

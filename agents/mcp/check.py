"""What `bullpen trust check` says about MCP-backed nicks.

A nick is MCP-backed when its lurker runs an MCP-speaking agent (the
`mcp_agent` key, or the `agents.mcp.handler:agent_step` step): the agent
answers by calling room_say through `bullpen mcp --as NICK`. Such a nick
works only when

- it is privileged, or its replies are unverified and nobody acts on them;
- that server can prove itself: the nick's key or the shared secret is
  readable here (strict listener), or the relaxed token is (relaxed);
- its agent program can be found.

Every problem says what to do. Nothing here contacts the hub or reads a
secret's value into a message.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any

from room.errors import ConfigError

if TYPE_CHECKING:
    from agents.config import NickConfig
    from agents.home import Home

MCP_STEP = "agents.mcp.handler:agent_step"


def agent_argv(config: NickConfig) -> list[str] | None:
    """The agent command of an MCP-backed nick, wherever it is configured."""
    argv: Any = getattr(config, "mcp_agent", None)
    if argv is None and config.handler == MCP_STEP:
        argv = config.options.get("mcp_agent")
    return list(argv) if isinstance(argv, list) else None


def is_mcp_backed(config: NickConfig) -> bool:
    return getattr(config, "mcp_agent", None) is not None or config.handler == MCP_STEP


def door_problems(home: Home, nick: str, *, relaxed: bool) -> list[str]:
    """Why `bullpen mcp --as NICK` could not prove itself to the hub; empty when it can."""
    if relaxed:
        if home.society.hub.relaxed_endpoint() is None:
            return [
                f"{nick} posts through the relaxed listener, but {home.society_file} has none; "
                f"set [hub] relaxed, or relaxed = false under [nicks.{nick}]"
            ]
        try:
            home.relaxed_token()
        except ConfigError as exc:
            return [
                f"`bullpen mcp --as {nick} --relaxed` cannot send the relaxed token, so the "
                f"hub refuses it: {exc.message}"
            ]
        return []
    if home.trust.proof_of(nick) is None:
        return []  # unprivileged: it has nothing to prove, and its posts are unverified
    try:
        home.signer_for(nick)
    except ConfigError as exc:
        return [
            f"`bullpen mcp --as {nick}` cannot prove itself, so the hub refuses its posts: "
            f"{exc.message}"
        ]
    return []


def agent_problems(nick: str, config: NickConfig) -> list[str]:
    argv = agent_argv(config)
    if not argv:
        return [
            f"{nick} runs {MCP_STEP} but names no agent: set options = "
            '{ mcp_agent = ["my-agent", "-p", "{prompt}"] } under '
            f"[nicks.{nick}] in society.toml"
        ]
    program = argv[0]
    path = config.env.get("PATH", os.environ.get("PATH", os.defpath))
    if "{" in program or shutil.which(program, path=path) is not None:
        return []
    return [
        f"its agent program {program!r} is not found (not a file, or not on PATH); install "
        f"it, or give its full path as the first word of mcp_agent under [nicks.{nick}]"
    ]


def mcp_rows(home: Home, *, privilege: bool = True) -> dict[str, list[str]]:
    """Every MCP-backed nick of the home and its problems (an empty list when it is fine).

    `privilege=False` leaves out the not-privileged problem, for a caller (the
    trust check's table) that already reports it for every nick.
    """
    rows: dict[str, list[str]] = {}
    for nick, config in home.society.nicks.items():
        if not is_mcp_backed(config):
            continue
        problems: list[str] = []
        if privilege and not home.trust.is_privileged(nick):
            problems.append(
                "MCP-backed but not privileged: its agent's replies go through "
                f"`bullpen mcp --as {nick}` unverified, so nobody acts on them. Fix: add "
                f'`{nick} = "secret"` under [privileged] in trust.toml and restart the hub'
            )
        problems += door_problems(home, nick, relaxed=config.relaxed)
        problems += agent_problems(nick, config)
        rows[nick] = problems
    return rows

"""The gateway's part of `bullpen trust check`: every client configured to skip it.

With a `[gateway]` section, a model call that does not pass the gateway
also skips its stop strings, its marker cuts, its budgets and its ledger
(seed 002 §4.1: "agents may otherwise reach a backend directly and bypass
it"). Flagged: an `openai` seat with a `base_url` (not `via = "gateway"`),
and a `cmd` seat, a nick's command or MCP agent whose argv or environment
names a model server — one of the gateway's backends, or any http(s) URL
that is neither the gateway nor the hub.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from agents.gateway.config import GatewayConfig
from agents.seats.registry import parse_seat_table
from agents.seats.tables import CmdSeatConfig, OpenAISeatConfig

if TYPE_CHECKING:
    from agents.home import Home

_URL = re.compile(r"https?://[^\s'\"]+")
_WHY = "a client that bypasses the gateway bypasses its stop strings, budgets and ledger"


def _where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def _direct(words: Iterable[str], ours: set[str]) -> str | None:
    """The first model-server URL among `words` that is not the gateway's or the hub's."""
    for word in words:
        for url in _URL.findall(word):
            if _where(url) not in ours:
                return str(url)
    return None


def bypass_problems(home: Home) -> list[str]:
    """One sentence per client that reaches a model server around the gateway."""
    if not home.has_gateway:
        return []
    society = home.society
    GatewayConfig.of(home)  # a broken [gateway] is a ConfigError here too
    ours = {_where(home.gateway_url()), _where(society.hub.strict_url())}
    relaxed = society.hub.relaxed_endpoint()
    if relaxed:
        ours.add(_where(relaxed))
    problems = []
    for name, raw in sorted(society.seats.items()):
        seat = parse_seat_table(name, raw)
        if isinstance(seat, OpenAISeatConfig) and seat.base_url is not None:
            if _where(seat.base_url) in ours:
                continue
            problems.append(
                f"[seats.{name}] calls {seat.base_url} directly; {_WHY}: replace base_url "
                'with via = "gateway" and give the model a [gateway.backends] prefix'
            )
        elif isinstance(seat, CmdSeatConfig):
            url = _direct([*seat.command, *seat.env.values()], ours)
            if url:
                problems.append(
                    f"[seats.{name}] runs a program pointed at {url}; {_WHY}: point it at "
                    f"{home.gateway_url()} with its nick's gateway token"
                )
    for nick, nick_config in sorted(society.nicks.items()):
        argv = nick_config.mcp_agent or nick_config.command or []
        url = _direct([*argv, *nick_config.env.values()], ours)
        if url:
            kind = "MCP agent" if nick_config.mcp_agent else "command"
            problems.append(
                f"[nicks.{nick}] {kind} is pointed at {url}; {_WHY}: point it at "
                f"{home.gateway_url()} with `bullpen gateway token {nick}`"
            )
    return problems

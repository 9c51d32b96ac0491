"""A home whose model seats reach SmolLM2 through the gateway: seat → gateway → llama-server.

Every judged role of a pipeline gets a `[seats.<role>]` table with
`via = "gateway"`, and each nick that asks a model gets its caller token,
so the gateway's ledger has one line per call with the server's own
`usage`. `Evidence` gathers what a run really did: the gateway's ledger,
the seats' `seat.http` log lines (what each call asked of the server), the
server's own token counters, and the step replies' provenance.
"""

from __future__ import annotations

import json
import re
from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.gateway.helpers import GatewayHome
from tests.realmodel.server import LlamaServer, start_llama
from tests.support import _toml, run_cli, set_seat

MODEL = "smol"  # the gateway routes it to llama-server by this prefix
SEAT_TIMEOUT_S = 240  # a loaded 2-core machine; the answers' max_tokens keep calls far shorter


def set_section(root: Path, section: str, **keys: Any) -> None:
    """Set keys at the top of `[section]` in a home's society.toml (an old line is replaced)."""
    path = root / "society.toml"
    text = path.read_text()
    header = re.compile(rf"^\[{re.escape(section)}\]\n(?:(?!\[).*\n?)*", re.M)
    match = header.search(text)
    assert match, f"society.toml has no [{section}]"
    body = match.group(0)
    for key in keys:
        body = re.sub(rf"^{re.escape(key)} = .*\n", "", body, flags=re.M)
    head, _, rest = body.partition("\n")
    added = "".join(f"{key} = {_toml(value)}\n" for key, value in keys.items())
    path.write_text(text[: match.start()] + head + "\n" + added + rest + text[match.end() :])


def seat_table() -> str:
    return "\n".join(
        [
            'kind = "openai"',
            'via = "gateway"',
            f'model = "{MODEL}"',
            f"timeout_s = {SEAT_TIMEOUT_S}",
            "temperature = 0",  # greedy: the same prompt, the same answer, run after run
        ]
    )


def through_the_gateway(
    gw: GatewayHome, llama: LlamaServer, roles: tuple[str, ...], nicks: tuple[str, ...]
) -> None:
    """Seat `roles` on SmolLM2 via the gateway, and give `nicks` their caller tokens."""
    gw.configure({"smol": {"base_url": llama.base_url, "prefixes": [MODEL]}})
    for role in roles:
        set_seat(gw.society.root, role, seat_table())
    for nick in nicks:
        gw.token(nick)


def seat_calls(root: Path, nicks: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every `seat.http` log line of these nicks' lurkers: one per request a seat sent."""
    calls = []
    for nick in nicks:
        log = root / "logs" / f"{nick}.log"
        if not log.exists():
            continue
        for line in log.read_text(errors="replace").splitlines():
            if '"seat.http"' in line:
                calls.append(json.loads(line))
    return calls


@dataclass
class Evidence:
    """What a run did, as the gateway, the seats and the server each saw it."""

    ledger: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    predicted: float  # tokens the server generated during the run (its /metrics)
    judgments: list[dict[str, Any]] = field(default_factory=list)

    def assert_honest(self, bounds: dict[str, Container[int]]) -> None:
        """Each call: one ledger line with the server's real usage, the schema sent, the step's
        max_tokens asked (among `bounds[step]`) and never exceeded; the server's own count of
        generated tokens is the ledger's sum."""
        assert self.calls, "no seat called the model"
        assert len(self.ledger) == len(self.calls), (self.ledger, self.calls)
        for entry in self.ledger:
            assert entry["status"] == 200, entry
            assert entry["estimated"] is False, entry  # the server's usage, not a guess
            assert entry["tokens_in"] > 0 and entry["tokens_out"] > 0, entry
        for call in self.calls:
            assert call["structured"] == "json_schema", call  # llama.cpp takes the schema
            assert call["max_tokens"] in bounds[call["step"]], call
        for entry in self.ledger:  # no answer ran past the largest bound asked
            assert entry["tokens_out"] <= max(c["max_tokens"] for c in self.calls), entry
        assert sum(e["tokens_out"] for e in self.ledger) == self.predicted
        for judgment in self.judgments:
            assert judgment["seat_kind"] == "openai" and judgment["seat"], judgment
            assert judgment["structured"] == "json_schema", judgment


def gather(
    gw: GatewayHome, llama: LlamaServer, nicks: tuple[str, ...], before: dict[str, float]
) -> Evidence:
    after = llama.metrics()
    return Evidence(
        ledger=gw.ledger(),
        calls=seat_calls(gw.society.root, nicks),
        predicted=after["tokens_predicted_total"] - before.get("tokens_predicted_total", 0),
    )


def audit(root: Path) -> None:
    done = run_cli(root, "audit", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@dataclass
class RealSeat:
    """A seat table on SmolLM2 through a home's own gateway: what a campaign asks, and what the
    gateway's ledger says it cost. `stop` ends the gateway, and llama-server when it started it."""

    gw: GatewayHome
    llama: LlamaServer
    seat: str
    own_llama: bool = False

    def cost(self) -> dict[str, int]:
        """Calls, tokens in and tokens out, as the gateway's ledger has them."""
        ledger = self.gw.ledger()
        return {
            "calls": len(ledger),
            "tokens_in": sum(int(e.get("tokens_in") or 0) for e in ledger),
            "tokens_out": sum(int(e.get("tokens_out") or 0) for e in ledger),
        }

    def stop(self) -> None:
        if self.gw.proc is not None:
            self.gw.proc.stop()
        if self.own_llama:
            self.llama.stop()


def real_seat(
    gw: GatewayHome,
    seat: str,
    nicks: tuple[str, ...],
    llama: LlamaServer | None = None,
    max_tokens: int | None = None,
) -> RealSeat:
    """Seat table `seat` on SmolLM2 via `gw`'s gateway (started here), caller tokens for `nicks`;
    llama-server is `llama`, else one started here in the home (a bench's own, stopped with it)."""
    own = llama is None
    server = llama or start_llama(gw.society.root / "llama")
    through_the_gateway(gw, server, (), nicks)
    table = seat_table() + (f"\nmax_tokens = {max_tokens}" if max_tokens else "")
    set_seat(gw.society.root, seat, table)
    try:
        gw.start()
    except BaseException:
        if own:
            server.stop()
        raise
    return RealSeat(gw, server, seat, own)

"""Who is in the society, and how each member is doing, as the Society page shows it.

Per nick: its handler kind and seat (society.toml), trust and privilege
(trust.toml), whether its lurker is alive (`bullpen up`'s state/up.json pids,
else its systemd user unit's state, else the last line it posted), and the last `bullpen trust check`'s
result (its ping thread in the room). Where shared memory exists
(agents.memory's index) each nick's lessons;
where the gateway is configured, its ledger summed by caller and backend.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.memory import lessons_for

if TYPE_CHECKING:
    from agents.home import Home
    from agents.web.feed import Feed

UP_STATE = "up.json"


def up_pids(home: Home) -> dict[str, int]:
    """The pids `bullpen up` wrote for its children (state/up.json), or {} without one."""
    try:
        data = json.loads((home.root / "state" / UP_STATE).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): int(v) for k, v in (data.get("pids") or {}).items() if isinstance(v, int)}


def systemd_states(nicks: list[str]) -> dict[str, str]:
    """`systemctl --user is-active` of each nick's lurker unit; {} without a user manager."""
    if not nicks or shutil.which("systemctl") is None:
        return {}
    units = [f"bullpen-lurker@{nick}.service" for nick in nicks]
    try:
        done = subprocess.run(
            ["systemctl", "--user", "is-active", *units], capture_output=True, text=True, timeout=2
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    states = done.stdout.split()
    return dict(zip(nicks, states, strict=True)) if len(states) == len(units) else {}


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Member:
    nick: str
    kind: str
    seat: str | None
    trusted: bool
    privileged: str | None  # "secret", "key" or None
    alive: str
    last_seen: dict[str, Any] | None
    trust_check: str
    lessons: list[str] = field(default_factory=list)


def _trust_checks(feed: Feed, operator: str) -> dict[str, str]:
    """Each nick's answer to the newest trust check's ping."""
    threads = [t for t in feed.threads if t.startswith("trust-check-")]
    if not threads:
        return {}
    lines = max((feed.threads[t] for t in threads), key=lambda ls: int(ls[0].get("seq", 0)))
    pings = {
        m.get("id"): str(m.get("to", "")).removeprefix("@")
        for m in lines
        if m.get("type") == "ask" and m.get("from") == operator
    }
    result = {nick: "no pong" for nick in pings.values()}
    for m in lines:
        nick = pings.get(m.get("in_reply_to"))
        if nick is None or m.get("from") != nick:
            continue
        if m.get("to") != f"@{operator}":
            result[nick] = "misaddressed pong"
        elif not m.get("verified"):
            result[nick] = "unverified pong"
        else:
            result[nick] = "ok"
    return result


def lessons(home: Home, nick: str) -> list[str]:
    """The texts of the nick's newest lessons in shared memory (none while it has no index)."""
    try:
        found = lessons_for(home, nick, limit=8)
    except Exception:  # the page shows the society even when the index is broken
        return []
    return [str(item.get("text", "")) for item in found]


def members(home: Home, feed: Feed) -> list[Member]:
    config, trust = home.society, home.trust
    pids = up_pids(home)
    units = systemd_states([nick for nick in config.nicks if nick not in pids])
    checks = _trust_checks(feed, config.operator)
    out = []
    for nick, nick_config in config.nicks.items():
        kind = (
            "python step"
            if nick_config.handler
            else "command"
            if nick_config.command
            else "mcp agent"
        )
        seen = feed.last_from.get(nick)
        if nick in pids:
            alive = "alive (bullpen up)" if pid_alive(pids[nick]) else "not running"
        elif units.get(nick) in ("active", "activating", "failed"):
            alive = {"active": "alive (systemd)", "activating": "starting (systemd)"}.get(
                units[nick], "failed (systemd)"
            )
        else:
            alive = f"last posted seq {seen['seq']}" if seen else "no line yet"
        proof = trust.proof_of(nick)
        out.append(
            Member(
                nick=nick,
                kind=kind,
                seat=nick_config.seat or feed.seats.get(nick),
                trusted=trust.is_trusted(nick),
                privileged=proof.method if proof else None,
                alive=alive,
                last_seen=seen,
                trust_check=checks.get(nick, "not checked"),
                lessons=lessons(home, nick),
            )
        )
    return out


def gateway_usage(home: Home) -> dict[str, dict[str, Any]] | None:
    """The gateway ledger summed by caller and by backend; None when there is no gateway."""
    if not home.has_gateway:
        return None
    from agents.gateway.config import GatewayConfig
    from agents.gateway.ledger import read_entries
    from agents.gateway.usage import summarize

    path = GatewayConfig.of(home).ledger_path(home)
    entries = list(read_entries(path)) if path.exists() else []
    return {by: summarize(entries, by, None) for by in ("caller", "backend")}

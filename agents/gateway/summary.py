"""The gateway's daily summary, posted into the room as a verified line from `@gateway`.

Once a day (`bullpen gateway summary`, which the `bullpen-gateway-summary`
timer runs just after midnight UTC) the ledger's lines of one UTC day are
summed: calls, failed calls and tokens, by caller and by backend, and the
state of every budget that day (used of limit, spent or not). The numbers
come from the ledger alone — the same lines `bullpen gateway usage` sums —
so they can be checked against it. The post is a `chat` to the operator in
the thread `gateway-summary-<day>`, its figures in `data.summary`; lurkers
do not act on it (`gateway` is privileged, so its posts are verified, but
not trusted).

The gateway process itself never writes to the room: a timer is how it
already runs (a systemd service), and a one-shot command keeps the room
client out of the serving path.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from agents.gateway.config import Budget, GatewayConfig
from agents.gateway.ledger import read_entries
from room.errors import ConfigError

if TYPE_CHECKING:
    from agents.home import Home

__all__ = ["NICK", "day_summary", "post_summary", "render", "yesterday"]

NICK = "gateway"  # the nick the summary is posted as; `bullpen init` makes it privileged
_FIELDS = ("calls", "failed", "tokens_in", "tokens_out")


def yesterday() -> str:
    return (datetime.now(UTC).date() - timedelta(days=1)).isoformat()


def _blank() -> dict[str, int]:
    return dict.fromkeys(_FIELDS, 0)


def _add(row: dict[str, int], entry: dict[str, Any]) -> None:
    row["calls"] += 1
    status = entry.get("status")
    row["failed"] += not isinstance(status, int) or status >= 400
    row["tokens_in"] += int(entry.get("tokens_in") or 0)
    row["tokens_out"] += int(entry.get("tokens_out") or 0)


def _budget_rows(
    kind: str, name: str, budget: Budget, used: dict[str, int]
) -> list[dict[str, Any]]:
    rows = []
    tokens = used["tokens_in"] + used["tokens_out"]
    for what, limit, spent_so_far in (
        ("calls_per_day", budget.calls_per_day, used["calls"]),
        ("tokens_per_day", budget.tokens_per_day, tokens),
    ):
        if limit is None:
            continue
        rows.append(
            {
                "budget": f"{kind}:{name}:{what}",
                "used": spent_so_far,
                "limit": limit,
                "spent": spent_so_far >= limit,
            }
        )
    return rows


def day_summary(
    config: GatewayConfig, entries: Iterable[dict[str, Any]], day: str
) -> dict[str, Any]:
    """The figures of one UTC day (`YYYY-MM-DD`) of ledger lines."""
    total = _blank()
    by_caller: dict[str, dict[str, int]] = {}
    by_backend: dict[str, dict[str, int]] = {}
    for entry in entries:
        if not str(entry.get("ts", "")).startswith(day):
            continue
        _add(total, entry)
        _add(by_caller.setdefault(str(entry.get("caller") or "?"), _blank()), entry)
        _add(by_backend.setdefault(str(entry.get("backend") or "?"), _blank()), entry)
    budgets: list[dict[str, Any]] = []
    for caller in sorted(set(by_caller) | set(config.callers)):
        used = by_caller.get(caller, _blank())
        budgets += _budget_rows("caller", caller, config.caller_budget(caller), used)
    if not set(by_caller) - set(config.callers):
        # [gateway.budget] binds every caller without a table of its own. No such caller
        # called that day, but the budget was set all the same: say so, at 0 used.
        budgets += _budget_rows("caller", "*", config.budget, _blank())
    for backend in sorted(config.backends):
        used = by_backend.get(backend, _blank())
        budgets += _budget_rows("backend", backend, config.backends[backend].budget, used)
    return {
        "day": day,
        **total,
        "by_caller": dict(sorted(by_caller.items())),
        "by_backend": dict(sorted(by_backend.items())),
        "budgets": budgets,
    }


def _row(name: str, row: dict[str, int]) -> str:
    return (
        f"  {name}: {row['calls']} calls ({row['failed']} failed), "
        f"{row['tokens_in']} tokens in, {row['tokens_out']} out"
    )


def render(summary: dict[str, Any]) -> str:
    """The post's body: one plain line per figure."""
    lines = [
        f"gateway usage on {summary['day']} (UTC): {summary['calls']} calls "
        f"({summary['failed']} failed), {summary['tokens_in']} tokens in, "
        f"{summary['tokens_out']} out",
        "by caller:",
        *(_row(n, r) for n, r in summary["by_caller"].items()),
        "by backend:",
        *(_row(n, r) for n, r in summary["by_backend"].items()),
        "budgets:",
    ]
    if not summary["by_caller"]:
        lines.insert(2, "  none")
        lines.insert(4, "  none")
    for b in summary["budgets"]:
        state = "SPENT" if b["spent"] else "ok"
        lines.append(f"  {b['budget']}: {b['used']} of {b['limit']} ({state})")
    if not summary["budgets"]:
        lines.append("  no budget is set")
    return "\n".join(lines)


def check_day(value: str | None) -> str:
    """--day: a UTC date, by default yesterday (the timer runs just after midnight)."""
    if value is None:
        return yesterday()
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise ConfigError(f"--day {value!r} is not a date; give one like 2026-12-01") from None


async def post_summary(home: Home, day: str) -> dict[str, Any]:
    """Post the day's summary as @gateway; the stored line. ConfigError when it cannot be
    verified (the nick is not privileged in trust.toml)."""
    if home.trust.proof_of(NICK) is None:
        raise ConfigError(
            f"{home.trust_file}: `{NICK}` is not under [privileged], so its summary would not "
            f'be verified; add the line `{NICK} = "secret"` there and restart the hub '
            "(`bullpen init` lays it down in a new home)"
        )
    config = GatewayConfig.required(home)
    path = config.ledger_path(home)
    summary = day_summary(config, read_entries(path) if path.exists() else [], day)
    async with home.client(NICK) as client:
        return await client.say(
            f"@{home.society.operator}",
            render(summary),
            type="chat",
            data={"summary": summary},
            thread=f"gateway-summary-{day}",
        )

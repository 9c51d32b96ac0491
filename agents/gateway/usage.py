"""`bullpen gateway usage`: the ledger summed by caller (nick), model, backend, run
(thread), seat or day, as a table or JSON; the web view's cost page shows the same rows."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GROUPS", "Usage", "as_json", "summarize", "table"]

# What rows can be grouped by: a ledger field, or "day" (the UTC date of the line's ts).
GROUPS = ("caller", "model", "backend", "thread", "seat", "day")


@dataclass
class Usage:
    calls: int = 0
    failed: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    estimated: int = 0
    cost: float = 0.0
    priced: int = 0  # calls with a cost (a model with a price)
    latencies: list[float] = field(default_factory=list)
    flags: dict[str, int] = field(default_factory=dict)


def summarize(entries: Iterable[dict[str, Any]], by: str, since: str | None) -> dict[str, Usage]:
    """Ledger lines from `since` (an ISO date or time, UTC) on, grouped by one field."""
    rows: dict[str, Usage] = {}
    for entry in entries:
        if since and str(entry.get("ts", "")) < since:
            continue
        key = str(entry.get("ts", ""))[:10] if by == "day" else entry.get(by)
        row = rows.setdefault(str(key) if key else "-", Usage())
        row.calls += 1
        status = entry.get("status")
        if not isinstance(status, int) or status >= 400:
            row.failed += 1
        row.tokens_in += int(entry.get("tokens_in") or 0)
        row.tokens_out += int(entry.get("tokens_out") or 0)
        row.estimated += bool(entry.get("estimated"))
        cost = entry.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < 1e12:
            row.cost += float(cost)
            row.priced += 1
        if isinstance(entry.get("latency_ms"), int | float):
            row.latencies.append(float(entry["latency_ms"]))
        for flag in entry.get("flags") or []:
            row.flags[str(flag)] = row.flags.get(str(flag), 0) + 1
    return rows


def _p50(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[len(ordered) // 2]:.0f}"


def _cost(row: Usage) -> str:
    return f"{row.cost:.4f}" if row.priced else "-"


def as_json(rows: dict[str, Usage], by: str) -> list[dict[str, object]]:
    """The rows as `--json` prints them (and the cost page reads them)."""
    return [
        {
            by: name,
            "calls": row.calls,
            "failed": row.failed,
            "tokens_in": row.tokens_in,
            "tokens_out": row.tokens_out,
            "estimated": row.estimated,
            "cost": round(row.cost, 9) if row.priced else None,
            "p50_ms": float(_p50(row.latencies)) if row.latencies else None,
            "flags": dict(sorted(row.flags.items())),
        }
        for name, row in sorted(rows.items())
    ]


def table(rows: dict[str, Usage], by: str) -> str:
    header = [by, "calls", "failed", "tokens in", "tokens out", "estimated", "cost", "p50 ms"]
    header.append("flags")
    lines = [header]
    total = Usage()
    for name in sorted(rows):
        row = rows[name]
        flags = " ".join(f"{k}={v}" for k, v in sorted(row.flags.items())) or "-"
        lines.append(
            [
                name,
                str(row.calls),
                str(row.failed),
                str(row.tokens_in),
                str(row.tokens_out),
                str(row.estimated),
                _cost(row),
                _p50(row.latencies),
                flags,
            ]
        )
        total.calls += row.calls
        total.failed += row.failed
        total.tokens_in += row.tokens_in
        total.tokens_out += row.tokens_out
        total.estimated += row.estimated
        total.cost += row.cost
        total.priced += row.priced
    lines.append(
        [
            "total",
            str(total.calls),
            str(total.failed),
            str(total.tokens_in),
            str(total.tokens_out),
            str(total.estimated),
            _cost(total),
            "",
            "",
        ]
    )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in lines
    )

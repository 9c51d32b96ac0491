"""`bullpen gateway usage`: the ledger summed by caller, model or backend, as a table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Usage", "summarize", "table"]


@dataclass
class Usage:
    calls: int = 0
    failed: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    estimated: int = 0
    latencies: list[float] = field(default_factory=list)
    flags: dict[str, int] = field(default_factory=dict)


def summarize(entries: Iterable[dict[str, Any]], by: str, since: str | None) -> dict[str, Usage]:
    """Ledger lines from `since` (an ISO date or time, UTC) on, grouped by one field."""
    rows: dict[str, Usage] = {}
    for entry in entries:
        if since and str(entry.get("ts", "")) < since:
            continue
        row = rows.setdefault(str(entry.get(by, "?")), Usage())
        row.calls += 1
        status = entry.get("status")
        if not isinstance(status, int) or status >= 400:
            row.failed += 1
        row.tokens_in += int(entry.get("tokens_in") or 0)
        row.tokens_out += int(entry.get("tokens_out") or 0)
        row.estimated += bool(entry.get("estimated"))
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


def table(rows: dict[str, Usage], by: str) -> str:
    header = [by, "calls", "failed", "tokens in", "tokens out", "estimated", "p50 ms", "flags"]
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
                _p50(row.latencies),
                flags,
            ]
        )
        total.calls += row.calls
        total.failed += row.failed
        total.tokens_in += row.tokens_in
        total.tokens_out += row.tokens_out
        total.estimated += row.estimated
    lines.append(
        [
            "total",
            str(total.calls),
            str(total.failed),
            str(total.tokens_in),
            str(total.tokens_out),
            str(total.estimated),
            "",
            "",
        ]
    )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in lines
    )

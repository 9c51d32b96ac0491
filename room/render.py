"""One room line as a person reads it in a terminal."""

from __future__ import annotations

from typing import Any

VERIFIED, UNVERIFIED = "✓", "·"


def human(line: dict[str, Any], width: int | None = None) -> str:
    """`03:07:19 #12 operator → @foreman ask ✓ [exp-7] body…`: time, seq, who, type, verified."""
    ts = str(line.get("ts", ""))
    clock = ts[11:19] if len(ts) >= 19 else ts
    mark = VERIFIED if line.get("verified") else UNVERIFIED
    thread = f" [{line['thread']}]" if line.get("thread") else ""
    body = str(line.get("body", ""))
    first, _, rest = body.partition("\n")
    more = f" (+{rest.count(chr(10)) + 1} lines)" if rest else ""
    text = (
        f"{clock} #{line.get('seq', '?')} {line.get('from', '?')} → {line.get('to', '?')} "
        f"{line.get('type', '?')} {mark}{thread} {first}{more}"
    )
    if width and len(text) > width:
        text = text[: max(10, width - 1)] + "…"
    return text

"""One room line as a person reads it in a terminal."""

from __future__ import annotations

import re
from typing import Any

VERIFIED, UNVERIFIED = "✓", "·"

# C0 and C1 controls, DEL, and the line/paragraph separators: a post must not
# be able to move the cursor, recolour or clear the reader's terminal. The
# bidirectional controls (embeddings and overrides U+202A-U+202E, isolates
# U+2066-U+2069, the LRM/RLM marks U+200E/U+200F, the Arabic letter mark
# U+061C) are shown too: they would let a post reorder what the reader sees,
# making a line's nick, seq or body look like something else ("Trojan Source").
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]"
)


def printable(text: str) -> str:
    """`text` with every control character shown as a visible escape like `\\x1b`."""
    return _CONTROL.sub(
        lambda m: (
            f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}"
        ),
        text,
    )


def human(line: dict[str, Any], width: int | None = None) -> str:
    """`03:07:19 #12 operator → @foreman ask ✓ [exp-7] body…`: time, seq, who, type, verified."""
    ts = str(line.get("ts", ""))
    clock = ts[11:19] if len(ts) >= 19 else ts
    mark = VERIFIED if line.get("verified") else UNVERIFIED
    thread = f" [{line['thread']}]" if line.get("thread") else ""
    body = str(line.get("body", ""))
    first, _, rest = body.partition("\n")
    extra = rest.count("\n") + 1
    more = f" (+{extra} line{'s' if extra > 1 else ''})" if rest else ""
    text = printable(
        f"{clock} #{line.get('seq', '?')} {line.get('from', '?')} → {line.get('to', '?')} "
        f"{line.get('type', '?')} {mark}{thread} {first}{more}"
    )
    if width and len(text) > width:
        text = text[: max(10, width - 1)] + "…"
    return text

"""The final result of a pipeline command as one JSON object (`--json` on `bullpen
expedition`, `build` and `backpass`): what a script reads instead of the report's text.

    {"thread": "build-…", "exit": 1, "report": "<the final report's body>",
     "data": {<the final report's data: outcome, funnel, build-report fields …>}}

The exit code is the command's own, unchanged by --json.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["final_json"]


def final_json(thread: str, code: int, line: dict[str, Any]) -> str:
    return json.dumps(
        {
            "thread": thread,
            "exit": code,
            "report": str(line.get("body", "")),
            "data": line.get("data") or {},
        },
        ensure_ascii=False,
    )

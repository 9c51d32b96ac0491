"""The step settings an eval home takes from the operator's: seats are measured as they run.

A fresh eval home is `bullpen init`'s; its seats are the operator's (society.py). So are
its steps' settings, or a seat is measured under budgets it never runs with (the scorer's
120 s with four batches at once on a one-slot server timed out in the eval, and nothing
could raise it): for each step nick of the eval home whose handler is the operator's
too, the `[nicks.X]` keys the operator set among timeout_s, concurrency, options, env and
(with no `--seat`, which puts one seat in every role) seat; and each pipeline section's
settings, [expedition], [backpass] and [build], but never a path (the eval home keeps its
own folders, and the operator's files are never its to touch).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from room.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from agents.home import Home

NICK_KEYS = ("timeout_s", "concurrency", "options", "env", "seat")
# Per section, the keys that name places: the eval home's own stay.
PATH_KEYS = {
    "expedition": {"kb", "briefs"},
    "backpass": {"public", "private", "traces", "state", "analysis_prompt", "synthesis_prompt"}
    | {"runs"},
    "build": {"root", "alias", "hidden", "seat_fence"},
}


def toml_value(value: Any) -> str:
    """One TOML value: strings, numbers, booleans, lists and tables of them."""
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return (
            "{ "
            + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items())
            + " }"
        )
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def set_keys(text: str, header: str, keys: Mapping[str, Any]) -> str:
    """`text` (a society.toml) with `keys` set at the top of its `[header]` table (each old
    line of those keys removed), the table made at the end when it is absent."""
    if not keys:
        return text
    lines = "".join(f"{key} = {toml_value(value)}\n" for key, value in keys.items())
    section = re.compile(rf"^\[{re.escape(header)}\]\n(?:(?!\[).*\n?)*", re.M)
    ours = re.compile(rf"^(?:{'|'.join(map(re.escape, keys))})\s*=.*\n?", re.M)
    found = section.search(text)
    if found is None:
        return text.rstrip("\n") + f"\n\n[{header}]\n" + lines
    body = ours.sub("", found.group(0).removeprefix(f"[{header}]\n"))
    return text[: found.start()] + f"[{header}]\n" + lines + body + text[found.end() :]


def step_settings(
    operator: Home, eval_nicks: Mapping[str, Any], seat: str | None
) -> dict[str, dict[str, Any]]:
    """{table header: keys} the eval home takes from the operator's society."""
    society = operator.society
    found: dict[str, dict[str, Any]] = {}
    for nick, config in society.nicks.items():
        ours = eval_nicks.get(nick)
        if ours is None or config.handler is None or config.handler != ours.handler:
            continue
        keys = [k for k in NICK_KEYS if k in config.model_fields_set and (k != "seat" or not seat)]
        found[f"nicks.{nick}"] = {k: getattr(config, k) for k in keys}
    for section, paths in PATH_KEYS.items():
        table = getattr(society, section) or {}
        found[section] = {k: v for k, v in table.items() if k not in paths}
    return {header: keys for header, keys in found.items() if keys}


def write_steps(
    society_file: Path, operator: Home, eval_nicks: Mapping[str, Any], seat: str | None
) -> None:
    """Put the operator's step settings into the eval home's society.toml, checked to parse."""
    text = society_file.read_text(encoding="utf-8")
    for header, keys in step_settings(operator, eval_nicks, seat).items():
        text = set_keys(text, header, keys)
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(
            f"the eval home's society.toml did not parse after your step settings were copied "
            f"into it ({exc}); check the [nicks.*], [expedition], [backpass] and [build] "
            f"tables of {operator.society_file}"
        ) from None
    society_file.write_text(text, encoding="utf-8")

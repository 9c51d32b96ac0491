"""Literal template filling: `{{name}}` markers replaced by text that is never interpreted.

The hand-run backpass filled its prompt with bash `${var//pattern/repl}`,
which (with `patsub_replacement`, on by default in bash 5.2) turned every `&`
in a trace into the matched placeholder; it showed only as a 36% quote-drop
rate. Here the template is scanned once, left to right: each marker is
replaced by its value exactly as given, and inserted text is never scanned
again, so `&`, `$1`, `\\1`, `{}` or `{{trace}}` inside a trace stay as they are.
A marker nobody fills is left as written, like any other text of the
template; only a missing required marker is an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["PLACEHOLDER", "TemplateError", "fill", "missing", "placeholders"]

PLACEHOLDER = re.compile(r"\{\{([a-z][a-z0-9_]*)\}\}")


class TemplateError(ValueError):
    """A template lacks a placeholder that must be there."""


def placeholders(template: str) -> list[str]:
    """The placeholder names a template uses, in order of first use."""
    seen: dict[str, None] = {}
    for match in PLACEHOLDER.finditer(template):
        seen.setdefault(match.group(1), None)
    return list(seen)


def missing(template: str, required: Iterable[str]) -> list[str]:
    """The `required` placeholder names the template does not use."""
    used = set(placeholders(template))
    return [name for name in required if name not in used]


def fill(template: str, values: Mapping[str, str], *, required: Iterable[str] = ()) -> str:
    """`template` with every `{{name}}` in `values` replaced by its value, literally, in one pass.

    A `{{name}}` not in `values` stays as written. Raises TemplateError when
    the template lacks a `required` one (the prompt would not be self-contained).
    """
    absent = missing(template, required)
    if absent:
        raise TemplateError(
            "the template lacks "
            + ", ".join("{{" + name + "}}" for name in absent)
            + "; without it the prompt is not self-contained, so add the marker"
        )

    def value(match: re.Match[str]) -> str:
        return values.get(match.group(1), match.group(0))

    # A function replacement is inserted as is: re never expands \1, \g<0> or & in it.
    return PLACEHOLDER.sub(value, template)

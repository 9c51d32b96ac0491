"""Literal template filling: `{{name}}` markers replaced by text that is never interpreted.

The hand-run backpass filled its prompt with bash `${var//pattern/repl}`,
which (with `patsub_replacement`, on by default in bash 5.2) turned every `&`
in a trace into the matched placeholder; it showed only as a 36% quote-drop
rate. Here the template is scanned once, left to right: each marker is
replaced by its value exactly as given, and inserted text is never scanned
again, so `&`, `$1`, `\\1`, `{}` or `{{trace}}` inside a trace stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["PLACEHOLDER", "TemplateError", "fill", "placeholders"]

PLACEHOLDER = re.compile(r"\{\{([a-z][a-z0-9_]*)\}\}")


class TemplateError(ValueError):
    """A template names a placeholder nobody fills, or lacks one that must be there."""


def placeholders(template: str) -> list[str]:
    """The placeholder names a template uses, in order of first use."""
    seen: dict[str, None] = {}
    for match in PLACEHOLDER.finditer(template):
        seen.setdefault(match.group(1), None)
    return list(seen)


def fill(template: str, values: Mapping[str, str], *, required: Iterable[str] = ()) -> str:
    """`template` with every `{{name}}` replaced by `values[name]`, literally, in one pass.

    Raises TemplateError when the template uses a name not in `values` (a typo
    would otherwise reach the model as a literal marker) or lacks a `required`
    one (the prompt would not be self-contained).
    """
    used = placeholders(template)
    unknown = [name for name in used if name not in values]
    if unknown:
        raise TemplateError(
            "the template uses "
            + ", ".join("{{" + name + "}}" for name in unknown)
            + " but only "
            + (", ".join("{{" + name + "}}" for name in sorted(values)) or "no placeholders")
            + " can be filled; fix the spelling or remove the marker"
        )
    missing = [name for name in required if name not in used]
    if missing:
        raise TemplateError(
            "the template lacks "
            + ", ".join("{{" + name + "}}" for name in missing)
            + "; without it the prompt is not self-contained, so add the marker"
        )
    # A function replacement is inserted as is: re never expands \1, \g<0> or & in it.
    return PLACEHOLDER.sub(lambda match: values[match.group(1)], template)

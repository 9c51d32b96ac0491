"""The two prompts: templates from files, filled literally, each self-contained.

Every prompt's first line is `step: analysis` or `step: synthesis` (a
harness that loads its own instructions has refused bare prompts as
injections; the first line says what the text is for). A template may
carry that line itself, after blank lines or HTML comments if it likes;
when it does not, the line is put first for it. Placeholders:

    analysis-prompt.md   {{trace}} (required), {{session}}, {{date}}
    synthesis-prompt.md  {{ledger}}, {{public_bullets}}, {{private_bullets}} (required),
                         {{date}}, {{min_sessions}}

A required placeholder missing from a template fails the run before any
model call: without it the prompt would not be self-contained. Any other
`{{name}}` is text like the rest and reaches the model as written; the
funnel notes it, since it is most likely a misspelt marker.

`payload` carries the same inputs as data, for the built-in local seat.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from agents.backpass.fill import TemplateError, fill, missing, placeholders
from agents.backpass.ledger import Entry
from agents.backpass.memory import Bullet
from agents.roots import Roots
from agents.runtime.step import JudgmentRequest
from room.errors import StepFailed

__all__ = [
    "analysis_request",
    "format_bullets",
    "format_ledger",
    "load_template",
    "synthesis_request",
    "unknown_placeholders",
    "with_step_line",
]

REQUIRED = {
    "analysis": ("trace",),
    "synthesis": ("ledger", "public_bullets", "private_bullets"),
}
FILLED = {
    "analysis": ("trace", "session", "date"),
    "synthesis": ("ledger", "public_bullets", "private_bullets", "date", "min_sessions"),
}
REQUIRED_WHAT = {
    "trace": "the trace's text",
    "ledger": "the open ledger lines",
    "public_bullets": "the public memory's bullets",
    "private_bullets": "the private memory's bullets",
}

# Blank lines and HTML comments a template may open with, before its step line.
_PREAMBLE = re.compile(r"\A(?:\s*<!--.*?-->)*\s*", re.DOTALL)
_STEP_LINE = re.compile(r"^\s*step:\s*(?P<step>\S+)\s*$", re.IGNORECASE)


class WrongStep(ValueError):
    """A template's step line names another step: it is the other template."""


def with_step_line(text: str, step: str) -> str:
    """The template with `step: <step>` as its first line.

    A step line after leading blank lines or HTML comments is moved to the
    top (the comments follow it); a template without one gets it put first.
    Raises WrongStep when the line names a different step.
    """
    text = text.removeprefix("\ufeff")
    preamble = _PREAMBLE.match(text)
    end = preamble.end() if preamble else 0
    line_start = text.rfind("\n", 0, end) + 1
    if not text[line_start:end].strip():
        end = line_start  # keep the first line's own indentation
    comments = text[:end].strip()
    rest = text[end:]
    first, _, after = rest.partition("\n")
    named = _STEP_LINE.match(first)
    if named is None:
        head = f"step: {step}\n" + (f"{comments}\n" if comments else "") + "\n"
        return head + rest
    if named["step"].lower() != step:
        raise WrongStep(named["step"])
    return f"step: {step}\n" + (f"{comments}\n" if comments else "") + after


def unknown_placeholders(template: str, step: str) -> list[str]:
    """`{{name}}` markers the step does not fill: left in the prompt as written."""
    return [name for name in placeholders(template) if name not in FILLED[step]]


def load_template(path: Path, step: str, roots: Roots | None = None) -> str:
    """A prompt template whose first line is `step: <step>` and that has its required markers.

    With `roots`, it is read only from under the prompts root (OutsideRoot otherwise)."""
    key = f"{step}_prompt"
    label = f"the {step} prompt template"
    try:
        text = (
            roots.read_text("prompts", path, label) if roots else path.read_text(encoding="utf-8")
        )
    except FileNotFoundError:
        raise StepFailed(
            f"the {step} prompt template {path} does not exist; `bullpen init` lays down "
            f"prompts/{step}-prompt.md, or point [backpass] {key} at your own"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StepFailed(f"cannot read the {step} prompt template {path}: {exc}") from None
    try:
        template = with_step_line(text, step)
    except WrongStep as exc:
        raise StepFailed(
            f"the {step} prompt template {path} begins 'step: {exc}', so it is the template "
            f"of another step; point [backpass] {key} at the {step} template, or make its "
            f"step line 'step: {step}'"
        ) from None
    absent = missing(template, REQUIRED[step])
    if absent:
        markers = ", ".join("{{" + name + "}}" for name in absent)
        what = ", ".join(REQUIRED_WHAT[name] for name in absent)
        raise StepFailed(
            f"the {step} prompt template {path} lacks {markers}; without it the prompt would "
            f"not contain {what}, so the model could not do its job. Add the marker where "
            f"that text belongs (see prompts/{step}-prompt.md from `bullpen init`)"
        )
    return template


def _fill(template: str, step: str, values: dict[str, str]) -> str:
    try:
        return fill(template, values, required=REQUIRED[step])
    except TemplateError as exc:
        raise StepFailed(f"the {step} prompt template is wrong: {exc}") from None


# The most tokens each answer can need (JudgmentRequest.max_tokens): the worst case of the
# schema each seat is sent (agents/backpass/schemas.py: a few short observations of each
# kind; a few short edits), so an answer held to its schema is never cut off mid-JSON and a
# weak model that runs to every bound stops long before its seat's timeout
# (tests/seats/test_step_token_bounds.py checks each against its schema).
ANALYSIS_TOKENS = 2100
SYNTHESIS_TOKENS = 2100


def analysis_request(
    template: str, *, session: str, trace: str, date: str, path: str
) -> JudgmentRequest:
    """The bulk seat's request for one trace; the trace text is in the prompt, filled literally."""
    prompt = _fill(template, "analysis", {"session": session, "trace": trace, "date": date})
    return JudgmentRequest(
        step="analysis",
        prompt=prompt,
        payload={"session": session, "path": path, "date": date, "text": trace},
        max_tokens=ANALYSIS_TOKENS,
    )


def format_bullets(bullet_list: Sequence[Bullet]) -> str:
    """One `ID  text` line per bullet, or a line saying there are none."""
    if not bullet_list:
        return "(no bullets yet)"
    return "\n".join(f"{bullet.id}  {bullet.text}" for bullet in bullet_list)


def format_ledger(entries: Iterable[Entry]) -> str:
    """One line per open entry: id, kind, text, and how many sessions saw it."""
    lines = []
    for entry in entries:
        count = len(entry.sessions)
        seen = f"{count} session{'s' if count != 1 else ''}"
        lines.append(f"{entry.id}  [{entry.kind or 'note'}] {entry.text}  ({seen})")
    return "\n".join(lines) or "(the ledger has no open lines)"


def synthesis_request(
    template: str,
    *,
    date: str,
    entries: Sequence[Entry],
    public: Sequence[Bullet],
    private: Sequence[Bullet],
    min_sessions: int,
    cover_threshold: float,
) -> JudgmentRequest:
    """The synthesis seat's request: the open ledger and both memories, in one prompt."""
    values = {
        "date": date,
        "ledger": format_ledger(entries),
        "public_bullets": format_bullets(public),
        "private_bullets": format_bullets(private),
        "min_sessions": str(min_sessions),
    }
    return JudgmentRequest(
        step="synthesis",
        prompt=_fill(template, "synthesis", values),
        payload={
            "date": date,
            "ledger": [
                {"id": e.id, "kind": e.kind, "text": e.text, "sessions": e.sessions}
                for e in entries
            ],
            "bullets": {
                "public": [{"id": b.id, "text": b.text} for b in public],
                "private": [{"id": b.id, "text": b.text} for b in private],
            },
            "min_sessions": min_sessions,
            "cover_threshold": cover_threshold,
        },
        max_tokens=SYNTHESIS_TOKENS,
    )

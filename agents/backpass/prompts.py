"""The two prompts: templates from files, filled literally, each self-contained.

A template's first line must be `step: analysis` or `step: synthesis`
(a harness that loads its own instructions has refused bare prompts as
injections; the first line says what the text is for). Placeholders:

    analysis-prompt.md   {{trace}} (required), {{session}}, {{date}}
    synthesis-prompt.md  {{ledger}}, {{public_bullets}}, {{private_bullets}} (required),
                         {{date}}, {{min_sessions}}

`payload` carries the same inputs as data, for the built-in local seat.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from agents.backpass.fill import TemplateError, fill
from agents.backpass.ledger import Entry
from agents.backpass.memory import Bullet
from agents.step import JudgmentRequest
from room.errors import StepFailed

__all__ = [
    "analysis_request",
    "format_bullets",
    "format_ledger",
    "load_template",
    "synthesis_request",
]

REQUIRED = {
    "analysis": ("trace",),
    "synthesis": ("ledger", "public_bullets", "private_bullets"),
}


def load_template(path: Path, step: str) -> str:
    """A prompt template, checked: it exists and its first line is `step: <step>`."""
    key = f"{step}_prompt"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StepFailed(
            f"the {step} prompt template {path} does not exist; `bullpen init` lays down "
            f"prompts/{step}-prompt.md, or point [backpass] {key} at your own"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StepFailed(f"cannot read the {step} prompt template {path}: {exc}") from None
    first = text.split("\n", 1)[0].strip()
    if first != f"step: {step}":
        raise StepFailed(
            f"the {step} prompt template {path} begins {first!r}; its first line must be "
            f"'step: {step}' so the prompt says what it is for"
        )
    return text


def _fill(template: str, step: str, values: dict[str, str]) -> str:
    try:
        return fill(template, values, required=REQUIRED[step])
    except TemplateError as exc:
        raise StepFailed(f"the {step} prompt template is wrong: {exc}") from None


def analysis_request(
    template: str, *, session: str, trace: str, date: str, path: str
) -> JudgmentRequest:
    """The bulk seat's request for one trace; the trace text is in the prompt, filled literally."""
    prompt = _fill(template, "analysis", {"session": session, "trace": trace, "date": date})
    return JudgmentRequest(
        step="analysis",
        prompt=prompt,
        payload={"session": session, "path": path, "date": date, "text": trace},
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
    )

"""Small prose builders for knowledge-base files in tests."""

from __future__ import annotations

_FIRST = "I planed the board again and my hands knew the grain better than my eyes did."
_THIRD = "The board was planed again and the grain showed itself under the light."


def paragraph(words: int, *, first_person: bool = True) -> str:
    """A paragraph of about `words` words (whole sentences), first or third person."""
    sentence = _FIRST if first_person else _THIRD
    per = len(sentence.split())
    count = max(1, round(words / per))
    return " ".join([sentence] * count)


def document(body: str, *, summary: str = "A note.", role: str = "lived", **meta: str) -> str:
    """A knowledge-base file: YAML frontmatter, then the body."""
    extra = "".join(f"{key}: {value}\n" for key, value in meta.items())
    return f'---\nsummary: "{summary}"\nrole: {role}\n{extra}---\n\n{body}\n'


def index(rows: list[tuple[str, str, str]], *, category: str = "Workshop") -> str:
    """An index table of (file, summary, keypoints) rows."""
    lines = [
        "| file | summary | keypoints | tags | category | monomyth |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {f} | {s} | {k} | t | {category} | 01 - Ordinary World |" for f, s, k in rows]
    return "\n".join(lines) + "\n"

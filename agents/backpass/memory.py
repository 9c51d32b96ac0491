"""memory.md: its bullets, their ids, what "covers" means, and applying edits.

A *bullet* is a line that starts, at column 0, with `-`, `*` or `+` and a
space, together with the indented non-blank lines right after it (its
continuation and sub-bullets). Lines inside a ``` fence are never bullets.
Bullets are numbered in file order, `PUB-001`, `PUB-002` … in the public
repository and `PRV-001` … in the private one; the numbers are computed
each run, never written into the file.

*Covers* is token containment. A text's tokens are its lowercase words of
two or more letters or digits, minus a short stop-word list, with a
trailing plural `s` dropped. A bullet covers a text when at least
`cover_threshold` (default 0.8) of the text's tokens are among the
bullet's; a text with no tokens is covered by nothing. Two ledger texts
*match* when their token sets' Jaccard similarity (shared / all) is at
least `match_threshold` (default 0.6).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agents.backpass.schemas import Edit

__all__ = [
    "Bullet",
    "apply_edits",
    "bullets",
    "covered_by",
    "covers",
    "similarity",
    "tokens",
]

_BULLET = re.compile(r"([-*+]) +(\S.*)")
_FENCE = re.compile(r"\s{0,3}(```|~~~)")
_WORD = re.compile(r"[a-z0-9]+")
_RULE = re.compile(r"[-*+ ]+")
# fmt: off
STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "do", "does", "for",
    "from", "had", "has", "have", "how", "if", "in", "into", "is", "it", "its", "of", "on",
    "or", "so", "than", "that", "the", "then", "there", "these", "this", "to", "too", "was",
    "we", "were", "what", "when", "where", "which", "while", "who", "will", "with", "you",
    "your", "our", "they", "them", "their", "i", "me", "my", "he", "she", "his", "her",
))
# fmt: on


@dataclass(frozen=True)
class Bullet:
    """One bullet: its id, its text (continuation folded in), and its lines [start, end)."""

    id: str
    text: str
    start: int
    end: int
    marker: str = "-"


def tokens(text: str) -> frozenset[str]:
    """The words that carry meaning, normalized, for matching and coverage."""
    out = set()
    for word in _WORD.findall(text.lower()):
        if len(word) < 2 or word in STOP_WORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.add(word)
    return frozenset(out)


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two token sets (0 when both are empty)."""
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def covers(bullet_tokens: frozenset[str], text_tokens: frozenset[str], threshold: float) -> bool:
    """Whether a bullet already says a text: most of the text's tokens are in it."""
    if not text_tokens:
        return False
    return len(text_tokens & bullet_tokens) / len(text_tokens) >= threshold


def covered_by(text: str, bullet_list: Iterable[Bullet], threshold: float) -> Bullet | None:
    """The first bullet that covers `text`, or None."""
    wanted = tokens(text)
    for bullet in bullet_list:
        if covers(tokens(bullet.text), wanted, threshold):
            return bullet
    return None


def _is_bullet(line: str) -> re.Match[str] | None:
    match = _BULLET.fullmatch(line.rstrip("\r\n"))
    if match is None or _RULE.fullmatch(line.rstrip("\r\n")):
        return None
    return match


def bullets(text: str, prefix: str) -> list[Bullet]:
    """The bullets of a memory file, numbered `<prefix>-001` … in order."""
    lines = text.splitlines(keepends=True)
    found: list[Bullet] = []
    in_fence = False
    index = 0
    while index < len(lines):
        line = lines[index]
        if _FENCE.match(line):
            in_fence = not in_fence
            index += 1
            continue
        match = None if in_fence else _is_bullet(line)
        if match is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end][:1] in (" ", "\t") and lines[end].strip():
            end += 1
        words = [match.group(2), *(lines[i].strip() for i in range(index + 1, end))]
        number = len(found) + 1
        found.append(Bullet(f"{prefix}-{number:03d}", " ".join(words), index, end, match.group(1)))
        index = end
    return found


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def apply_edits(text: str, prefix: str, edits: Sequence[Edit]) -> list[str]:
    """The file's text after each edit in turn; ids always refer to the original numbering.

    `add` goes after its `bullet` when one is named, else after the last
    bullet of the file (or at its end when it has none); `replace` keeps the
    bullet's marker; `remove` drops the bullet with its continuation lines.
    """
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += _newline(text)
    newline = _newline(text)
    found = bullets(text, prefix)
    by_id = {bullet.id: bullet for bullet in found}
    # Blocks: (bullet id or None, lines). Added bullets get no id.
    blocks: list[tuple[str | None, list[str]]] = []
    index = 0
    for bullet in found:
        blocks.extend((None, [line]) for line in lines[index : bullet.start])
        blocks.append((bullet.id, lines[bullet.start : bullet.end]))
        index = bullet.end
    blocks.extend((None, [line]) for line in lines[index:])

    def position(bullet_id: str) -> int:
        for number, (block_id, _) in enumerate(blocks):
            if block_id == bullet_id:
                return number
        raise KeyError(
            f"bullet {bullet_id} is not in the file (was it removed by an earlier edit?)"
        )

    added = 0
    texts: list[str] = []
    for edit in edits:
        marker = by_id[edit.bullet].marker if edit.bullet in by_id else "-"
        if edit.op == "add":
            added += 1
            new_line = f"{marker} {edit.text}{newline}"
            if edit.bullet is not None:
                at = position(edit.bullet) + 1
            else:
                last = [n for n, (block_id, _) in enumerate(blocks) if block_id is not None]
                at = last[-1] + 1 if last else len(blocks)
            blocks.insert(at, (f"+{added}", [new_line]))
        elif edit.op == "replace":
            assert edit.bullet is not None
            at = position(edit.bullet)
            blocks[at] = (edit.bullet, [f"{marker} {edit.text}{newline}"])
        else:
            assert edit.bullet is not None
            del blocks[position(edit.bullet)]
        texts.append("".join(line for _, block in blocks for line in block))
    return texts

"""The blaze file: the operator's guidance for one piece, checked before it is used.

A blaze is one UTF-8 Markdown file, optionally opening with a YAML
frontmatter block, and it is guidance (`role: guidance`; a file with no
role is read as guidance, since it was given as one). Any other role is
refused: the blaze's phrases are banned from the brief, and a `lived`
file's words are the operator's own voice, which a brief must be free to use.

Its claims and open questions seed term generation; its named phrases are
words a fan-out term must get away from, and the brief bans them. Both are
read from the frontmatter lists `claims`, `open_questions` and `phrases`
(or `named_phrases`), and from the body's "Claims" / "Open questions" lists
and its quoted or bold phrases. The brief bans more than the named
phrases: the blaze's short plain-prose sentences too (`banned`; see
agents.expedition.phrases), since a blaze often states its aphorisms as
ordinary sentences. Those are not named phrases: the fan-out gate would
otherwise forbid every word of them.

A problem is refused, never skipped, so nothing the operator wrote is
silently lost: `read_blaze` is the one check, used by the command before it
posts anything and by step 0 (and step 6) for a run asked for in the room.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agents.expedition.kb import (
    MAX_KB_FILE_BYTES,
    UnclosedFrontmatter,
    load_yaml,
    split_frontmatter,
)
from agents.expedition.phrases import harvest
from agents.roots import FileTooLarge, Roots, read_at_most

ROLE = "guidance"
CLAIM_KEYS = ("claims", "open_questions")
PHRASE_KEYS = ("phrases", "named_phrases")

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*(?P<title>.+?)\s*#*\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?P<text>.+?)\s*$")
_SECTIONS = ("claim", "open question", "question")
_WITHOUT = "or run without --blaze"


class BlazeError(ValueError):
    """A blaze file the expedition cannot use; the message names the file and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Blaze:
    """What a blaze gives the run: claims and questions to seed terms, phrases to ban."""

    path: Path
    claims: list[str]
    phrases: list[str]  # named: frontmatter `phrases` and marked spans
    banned: list[str] = field(default_factory=list)  # named, then short prose sentences


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, str):
        return "a single text"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    return f"a {type(value).__name__}"


def _text_list(path: Path, meta: dict[str, Any], key: str) -> list[str]:
    """A frontmatter list of plain-text items; blank or absent is empty, anything else refused."""
    value = meta.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BlazeError(
            f"the blaze file {path}: {key} must be a list, one '- item' per line, not "
            f"{_kind(value)}; fix its frontmatter, {_WITHOUT}"
        )
    items = []
    for number, item in enumerate(value, 1):
        if item is None or isinstance(item, dict | list):
            raise BlazeError(
                f"the blaze file {path}: {key} item {number} is not plain text "
                f"({_kind(item) if item is not None else 'empty'}); write each item as one "
                f"line of text, {_WITHOUT}"
            )
        if str(item).strip():
            items.append(str(item).strip())
    return items


def _text(path: Path, roots: Roots | None) -> str:
    if path.is_dir():
        raise BlazeError(
            f"the blaze {path} is a folder; --blaze takes one Markdown file (role: guidance)"
        )
    try:
        if roots is not None:
            raw = roots.read_bytes("blaze", path, "the blaze file", limit=MAX_KB_FILE_BYTES)
        else:
            with path.open("rb") as handle:
                raw = read_at_most(handle, MAX_KB_FILE_BYTES, path)
    except FileTooLarge as exc:  # refused from its size, before a byte is read
        raise BlazeError(
            f"the blaze file {path} is {exc.size} bytes; a blaze may be at most "
            f"{MAX_KB_FILE_BYTES} bytes (it is one piece's guidance), {_WITHOUT}"
        ) from None
    except FileNotFoundError:
        raise BlazeError(
            f"the blaze file {path} does not exist; check the path, {_WITHOUT}"
        ) from None
    except OSError as exc:
        raise BlazeError(
            f"cannot read the blaze file {path} ({exc.strerror or exc}); check its "
            f"permissions, {_WITHOUT}"
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"byte 0x{raw[exc.start]:02x} at offset {exc.start}"
        text = ""
    else:
        where = f"a NUL byte at offset {text.find(chr(0))}" if "\x00" in text else ""
    if where:
        raise BlazeError(
            f"the blaze file {path} is not UTF-8 text ({where}); a blaze must be a UTF-8 "
            f"Markdown file (role: guidance): save it as UTF-8, {_WITHOUT}"
        )
    return text


def _frontmatter(path: Path, text: str) -> tuple[dict[str, Any], str]:
    try:
        front, body = split_frontmatter(text)
    except UnclosedFrontmatter:
        raise BlazeError(
            f"the blaze file {path} opens a frontmatter fence (---) and never closes it; "
            "add the closing --- line"
        ) from None
    if front is None:
        return {}, body
    try:
        meta = load_yaml(front)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "a syntax error"
        at = f" on line {mark.line + 2}" if mark is not None else ""
        raise BlazeError(
            f"the blaze file {path}: its frontmatter is not valid YAML ({problem}{at}); "
            f"fix it, {_WITHOUT}"
        ) from None
    if meta is None:
        return {}, body
    if not isinstance(meta, dict):
        raise BlazeError(
            f"the blaze file {path}: its frontmatter is not a mapping of 'key: value' lines "
            f"(it is {_kind(meta)}); write role, claims, open_questions and phrases as keys"
        )
    return meta, body


def _role(path: Path, meta: dict[str, Any]) -> None:
    role = meta.get("role")
    if role is not None and not isinstance(role, str):
        raise BlazeError(
            f"the blaze file {path}: role must be text (role: {ROLE}), not {_kind(role)}; "
            f"fix its frontmatter, {_WITHOUT}"
        )
    if role is None or role.strip().lower() == ROLE:
        return
    raise BlazeError(
        f"the blaze file {path} says role: {role}; a blaze is guidance for one piece "
        f"(role: {ROLE}), and the brief bans its phrases. Set role: {ROLE} if it is guidance; "
        f"a {role} file belongs in the knowledge base, not after --blaze"
    )


def _body_claims(body: str) -> list[str]:
    """Bullet items under a "Claims" or "Open questions" heading."""
    claims: list[str] = []
    in_section = False
    for line in body.splitlines():
        heading = _HEADING.match(line)
        if heading:
            in_section = any(s in heading["title"].lower() for s in _SECTIONS)
            continue
        item = _ITEM.match(line)
        if in_section and item:
            claims.append(item["text"])
    return claims


def _unique(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    kept: list[str] = []
    for item in items:
        if item.lower() not in seen:
            seen.add(item.lower())
            kept.append(item)
    return kept


def read_blaze(path: Path, roots: Roots | None = None) -> Blaze:
    """Read and check one blaze file; BlazeError names the file and what to fix.

    With `roots`, it is read only from under the blaze root (OutsideRoot otherwise),
    checked on the opened file, not on a name checked earlier."""
    meta, body = _frontmatter(path, _text(path, roots))
    _role(path, meta)
    claims = [c for key in CLAIM_KEYS for c in _text_list(path, meta, key)]
    phrases = [p for key in PHRASE_KEYS for p in _text_list(path, meta, key)]
    claims += _body_claims(body)
    phrases += harvest([body], prose=False)
    banned = _unique([*phrases, *harvest([body])])
    return Blaze(path, _unique(claims), _unique(phrases), banned)

"""Reading a knowledge base: the corpus index table and each file's frontmatter.

A knowledge base is a folder with `corpus_index.md` (a Markdown table with at
least the columns file, summary, keypoints, tags, category and monomyth) and
the Markdown files it lists, each a YAML frontmatter block above its body.
Indexes are written by hand and by other tools, so the parser is tolerant:
any column order, extra columns, escaped pipes, optional outer pipes, header
names matched ignoring case, spaces, underscores and hyphens, file cells in
backticks or as Markdown links. A bad row or file becomes a flag naming it;
only an index with nothing usable stops a run.
"""

from __future__ import annotations

import io
import posixpath
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

import yaml

from agents.roots import FileTooLarge, OutsideRoot, Roots, inside
from room.errors import StepFailed

INDEX_NAME = "corpus_index.md"
REQUIRED_COLUMNS = ("file", "summary", "keypoints", "tags", "category", "monomyth")
CORPUS_PREFIX = "Corpus/"
MAX_KB_FILE_BYTES = 8 * 1024 * 1024  # a knowledge-base file larger than this is refused unread

_SEPARATOR_CELL = re.compile(r"^:?-+:?$")
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_FENCE = re.compile(r"^(?:---|\.\.\.)\s*$")
_LINK = re.compile(r"^\[(?P<text>[^\]]*)\]\((?P<target>.*)\)$")


@dataclass(frozen=True)
class IndexRow:
    """One row of the index; `id` is `row_<n>`, n counting data rows from 1."""

    id: str
    file: str
    summary: str
    keypoints: str
    tags: str = ""
    category: str = ""
    monomyth: str = ""
    archetype: str = ""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Index:
    rows: list[IndexRow]
    flags: list[str] = field(default_factory=list)

    def by_id(self) -> dict[str, IndexRow]:
        return {row.id: row for row in self.rows}


def split_cells(line: str) -> list[str]:
    """Cells of one table line; `\\|` is a literal pipe, outer pipes are optional."""
    cells: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\" and i + 1 < len(line) and line[i + 1] == "|":
            current.append("|")
            i += 2
            continue
        if char == "|":
            cells.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    cells.append("".join(current))
    stripped = line.strip()
    if stripped.startswith("|"):
        cells = cells[1:]
    if stripped.endswith("|") and not stripped.endswith("\\|") and cells:
        cells = cells[:-1]
    return [cell.strip() for cell in cells]


def _column_name(cell: str) -> str:
    """`Key Points`, `key_points`, `Keypoints` and `key-points` all read as `keypoints`."""
    return re.sub(r"[^a-z0-9]", "", cell.lower())


def file_cell(cell: str) -> str:
    """The path a `file` cell names: as written, in backticks, or as a Markdown link's target.

    A link's target may be in `<…>`, carry a "title" or a `#fragment`, and be
    percent-encoded (`%20`); the target wins over the link text.
    """
    value = cell.strip()
    link = _LINK.match(value)
    if link:
        target = link["target"].strip()
        if target.startswith("<"):
            target = target[1:].split(">", 1)[0]
        else:
            target = target.split(maxsplit=1)[0] if target else ""
        target = unquote(target.split("#", 1)[0]).strip()
        value = target or link["text"]
    return value.strip().strip("`").strip()


def _is_separator(cells: list[str]) -> bool:
    return bool(cells) and all(_SEPARATOR_CELL.match(c.replace(" ", "")) for c in cells)


def _clean(cell: str) -> str:
    return _BREAK.sub("; ", cell).strip()


def parse_index(text: str, source: str = INDEX_NAME) -> Index:
    """The index's rows; raise StepFailed when no table with the needed columns exists."""
    lines = text.splitlines()
    header_at = None
    columns: list[str] = []
    for number, line in enumerate(lines):
        if "|" not in line:
            continue
        names = [_column_name(c) for c in split_cells(line)]
        if "file" in names and "summary" in names:
            header_at, columns = number, names
            break
    if header_at is None:
        raise StepFailed(
            f"the index {source} has no Markdown table whose header names 'file' and "
            f"'summary'; write it as a table with columns {', '.join(REQUIRED_COLUMNS)}"
        )
    missing = [name for name in REQUIRED_COLUMNS if name not in columns]
    if missing:
        raise StepFailed(
            f"the index {source}: its table lacks the column(s) {', '.join(missing)}; "
            f"its header must name {', '.join(REQUIRED_COLUMNS)}"
        )
    rows: list[IndexRow] = []
    flags: list[str] = []
    number = 0
    body = lines[header_at + 1 :]
    if body and _is_separator(split_cells(body[0])):
        body = body[1:]
    for line in body:
        if not line.strip():
            if number:
                break
            continue
        if "|" not in line:
            break
        cells = split_cells(line)
        number += 1
        values = dict(zip(columns, cells, strict=False))
        file = file_cell(values.get("file", ""))
        if not file:
            flags.append(f"[KB_ROW_NO_FILE:row_{number}]")
            continue
        rows.append(
            IndexRow(
                id=f"row_{number}",
                file=file,
                summary=_clean(values.get("summary", "")),
                keypoints=_clean(values.get("keypoints", "")),
                tags=_clean(values.get("tags", "")),
                category=_clean(values.get("category", "")),
                monomyth=_clean(values.get("monomyth", "")),
                archetype=_clean(values.get("archetype", "")),
            )
        )
    return Index(rows, flags)


def _confined(kb: Path) -> Roots:
    """The knowledge-base folder as the only place its index and files are read from.

    Every read opens through agents.roots, which checks the opened file's real path:
    a file that is (or is swapped for) a link out of the folder is never read."""
    return Roots.single("kb", kb)


def load_index(kb: Path) -> Index:
    """Read and parse `<kb>/corpus_index.md`; StepFailed says what to fix."""
    path = kb / INDEX_NAME
    try:
        text = _confined(kb).read_text("kb", path, "the index")
    except FileNotFoundError:
        raise StepFailed(
            f"the knowledge base {kb} has no {INDEX_NAME}; point --kb (or [expedition] kb "
            "in society.toml) at the folder that holds it"
        ) from None
    except UnicodeDecodeError as exc:
        raise StepFailed(
            f"the index {path} is not UTF-8 text (at byte offset {exc.start}); save it as "
            "UTF-8 Markdown"
        ) from None
    except OSError as exc:
        raise StepFailed(
            f"cannot read the index {path} ({exc.strerror or exc}); check its permissions"
        ) from None
    index = parse_index(text, str(path))
    if not index.rows:
        raise StepFailed(
            f"the index {path} has a table but no rows with a file; add rows to the index"
        )
    return index


def check_kb(kb: Path) -> Index:
    """The knowledge base's parsed index, or StepFailed saying what is wrong with it.

    The check both the command (before it posts a run) and step 0 make, so
    a knowledge-base problem is reported as one, never as a later step's.
    """
    if not kb.exists():
        raise StepFailed(
            f"the knowledge base {kb} does not exist; pass --kb with the folder that holds "
            f"{INDEX_NAME}, or set [expedition] kb in society.toml"
        )
    if not kb.is_dir():
        raise StepFailed(
            f"the knowledge base {kb} is a file, not a folder; pass --kb (or set "
            f"[expedition] kb in society.toml) with the folder that holds {INDEX_NAME}"
        )
    return load_index(kb)


def locate(kb: Path, file: str) -> tuple[Path | None, str | None]:
    """(where an index row's file is, None), or (None, the flag saying why it is not usable).

    As written, or without a leading `Corpus/`. A path or link that would leave
    the folder is never followed: `[KB_FILE_OUTSIDE:…]` names it."""
    root = kb.resolve()
    outside = False
    for option in _options(file):
        candidate = (root / option).resolve()
        if not inside(root, candidate):
            outside = outside or (root / option).is_symlink() or candidate.exists()
            continue
        if candidate.is_file():
            return candidate, None
    return None, f"[KB_FILE_OUTSIDE:{file}]" if outside else f"[KB_FILE_MISSING:{file}]"


def _options(file: str) -> list[str]:
    """Where an index's file may be: as written, or without a leading `Corpus/`."""
    if file.startswith(CORPUS_PREFIX):
        return [file, file.removeprefix(CORPUS_PREFIX)]
    return [file]


def on_disk(kb: Path, file: str) -> str | None:
    """An index row's file as it is on disk, relative to the knowledge base; None if absent.

    The index may write `Corpus/voice-logs/x.md` for `voice-logs/x.md`: every
    report and brief shows the one form that exists, found the way `locate` finds it.
    """
    root = kb.resolve()
    for option in _options(file):
        candidate = root / option
        if candidate.is_file() and inside(root, candidate.resolve()):
            return PurePosixPath(posixpath.normpath(option)).as_posix()
    return None


def resolve(kb: Path, file: str) -> Path | None:
    """Where an index row's file is inside the knowledge base, or None (see locate)."""
    return locate(kb, file)[0]


def _read_text(kb: Path, path: Path) -> str:
    return read_kb_bytes(kb, path).decode("utf-8")


class UnclosedFrontmatter(ValueError):
    """A file opens a frontmatter fence and never closes it."""


def _opens_frontmatter(first_line: str) -> bool:
    return first_line.strip() == "---"


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """(frontmatter, body): the body is everything below the closing fence."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or not _opens_frontmatter(lines[0]):
        return None, text
    for number in range(1, len(lines)):
        if _FENCE.match(lines[number]):
            return "".join(lines[1:number]), "".join(lines[number + 1 :])
    raise UnclosedFrontmatter("the frontmatter fence opened on line 1 is never closed")


def frontmatter_closes(path: Path, kb: Path | None = None) -> bool:
    """Whether a file's frontmatter, if it opens one, is closed; reads no further than the fence.

    The same rule as split_frontmatter, line by line, so checking every file
    a 5,000-row index matches costs a few lines each, not whole files. The file
    is opened inside `kb` (default: its own folder) through agents.roots.
    """
    opened = _confined(kb or path.parent).open("kb", path, "the knowledge-base file")
    with opened as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as handle:
        lines = (line for raw_line in handle for line in raw_line.splitlines())
        first = next(lines, "").removeprefix("\ufeff")
        if not _opens_frontmatter(first):
            return True
        return any(_FENCE.match(line) for line in lines)


class BadFrontmatter(ValueError):
    """Frontmatter the expedition refuses: an alias, or a field of the wrong type."""


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses every alias: a 1 KB frontmatter of nested aliases (an "alias
    bomb") expands to gigabytes once a field is turned into text. Frontmatter never needs one."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]  # PyYAML stubs
            raise yaml.composer.ComposerError(
                None,
                None,
                f"found the alias *{event.anchor}; frontmatter may not use YAML aliases",
                event.start_mark,
            )
        return super().compose_node(parent, index)


def load_yaml(text: str) -> Any:
    """YAML as safe_load reads it, but refusing aliases (yaml.YAMLError says where)."""
    return yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader subclass: safe


_TEXT_FIELDS = ("role", "summary")  # the fields a knowledge-base file's frontmatter may set


def parse_frontmatter(text: str | None) -> dict[str, Any]:
    """The frontmatter's mapping; anything that is not a YAML mapping reads as empty.

    Raise BadFrontmatter for an alias or a `role` or `summary` that is not text.
    """
    if not text:
        return {}
    try:
        loaded = load_yaml(text)
    except yaml.composer.ComposerError as exc:
        if "alias" in str(exc.problem):
            raise BadFrontmatter(str(exc.problem)) from None
        return {}
    except yaml.YAMLError:
        return {}
    if not isinstance(loaded, dict):
        return {}
    for key in _TEXT_FIELDS:
        value = loaded.get(key)
        if value is not None and not isinstance(value, str):
            raise BadFrontmatter(f"{key} must be text, not a {type(value).__name__}")
    return loaded


@dataclass(frozen=True)
class Document:
    """A knowledge-base file split into its frontmatter and its body."""

    file: str
    meta: dict[str, Any]
    body: str

    @property
    def role(self) -> str:
        return str(self.meta.get("role", "")).strip().lower()

    @property
    def summary(self) -> str:
        value = self.meta.get("summary", "")
        return value.strip() if isinstance(value, str) else ""


def parse_document(file: str, text: str) -> Document:
    """Raise UnclosedFrontmatter when the fence never closes."""
    front, body = split_frontmatter(text)
    return Document(file, parse_frontmatter(front), body)


def check_file(kb: Path, file: str) -> str | None:
    """The flag that keeps an index row's file out of a dig, or None when it can be read.

    Missing, unreadable, or opening a frontmatter fence it never closes: the
    three things read_document would refuse, found without reading the body.
    """
    path, flag = locate(kb, file)
    if path is None:
        return flag
    try:
        if _too_large(path):
            return f"[KB_FILE_TOO_LARGE:{file}]"
        closed = frontmatter_closes(path, kb)
    except OutsideRoot:  # swapped for a link out of the folder since it was located
        return f"[KB_FILE_OUTSIDE:{file}]"
    except (OSError, UnicodeDecodeError):
        return f"[KB_FILE_UNREADABLE:{file}]"
    return None if closed else f"[KB_FRONTMATTER_UNCLOSED:{file}]"


def _too_large(path: Path) -> bool:
    """Over MAX_KB_FILE_BYTES by its size on disk: decided before a byte of it is read."""
    return path.stat().st_size > MAX_KB_FILE_BYTES


def read_document(kb: Path, file: str) -> tuple[Document | None, str | None]:
    """(document, None) or (None, flag naming the file and what is wrong with it)."""
    path, flag = locate(kb, file)
    if path is None:
        return None, flag
    try:
        text = _read_text(kb, path)
    except OutsideRoot:
        return None, f"[KB_FILE_OUTSIDE:{file}]"
    except FileTooLarge:  # from the opened file's size, before a byte of it is read
        return None, f"[KB_FILE_TOO_LARGE:{file}]"
    except (OSError, UnicodeDecodeError):
        return None, f"[KB_FILE_UNREADABLE:{file}]"
    return document_of(file, text)


def document_of(file: str, text: str) -> tuple[Document | None, str | None]:
    """(document, None), or (None, the flag naming the file) when its frontmatter is refused:
    read_document's verdict on text read here or fetched (agents/expedition/travel.py)."""
    try:
        return parse_document(file, text), None
    except UnclosedFrontmatter:
        return None, f"[KB_FRONTMATTER_UNCLOSED:{file}]"
    except BadFrontmatter:
        return None, f"[KB_FRONTMATTER_INVALID:{file}]"


def read_kb_bytes(kb: Path, path: Path) -> bytes:
    """A knowledge-base file's bytes, opened inside `kb` and bounded by MAX_KB_FILE_BYTES."""
    return _confined(kb).read_bytes("kb", path, "the knowledge-base file", limit=MAX_KB_FILE_BYTES)

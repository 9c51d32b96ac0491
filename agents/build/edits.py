"""The edits an openai code seat answers, and how they are applied: all of a turn, or none.

The answer is JSON (the seats speak JSON, agents/seats/):

    {"edits": [{"path": "calc.py", "start": 12, "end": 13, "old": "the lines 12-13 as shown",
                "new": "the lines that replace them"}],
     "files": [{"path": "new_or_shown.py", "content": "the whole file"}]}

The prompt shows each file it shows in full with its lines numbered
(agents/build/prompts.py), so an edit names the lines it replaces, `start`
to `end`, and copies them as `old`: a check that the seat read the lines it
changes (an `old` that is not what those lines say refuses the edit), and
what keeps a line number from silently landing elsewhere. `new` replaces
them (several lines joined by newlines; empty deletes them). Numbers refer
to the file as shown, so several edits of one file never shift each other;
two edits may not overlap. A numbered line range is a format a grammar can
hold a small model to (agents/build/editschema.py): the paths are a fixed
choice, the numbers bounded, every string sized to the answer's budget.

Only a file the prompt showed in full may be edited. A whole file is valid
for any file the prompt showed in full and for a new file; an existing file
the prompt did not show cannot be overwritten blind, and a file the answer
replaces whole cannot also be edited by line.

Everything is checked in memory first; if any edit does not apply, nothing
is written and EditRefused lists why, edit by edit, for the seat's next
prompt. A path out of the clone (absolute, '..', .git, or through a link
that leads out) is OutsideRoot: a rule broken, and nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.roots import OutsideRoot, Roots

__all__ = ["CodeAnswer", "EditRefused", "FileChange", "LineEdit", "apply_answer", "shown_lines"]

MAX_FILE_BYTES = 512 * 1024
MAX_LINE_NUMBER = 1_000_000
QUOTED = 160  # how much of a file's real lines a refusal quotes back


class FileChange(BaseModel):
    """A whole file: a new one, or one the prompt showed in full."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1, max_length=400)
    content: str = Field(max_length=MAX_FILE_BYTES)


class LineEdit(BaseModel):
    """Replace lines `start` to `end` of `path` (numbered as shown), which read `old`, with
    `new`."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1, max_length=400)
    start: int = Field(ge=1, le=MAX_LINE_NUMBER)
    end: int = Field(ge=1, le=MAX_LINE_NUMBER)
    old: str = Field(max_length=MAX_FILE_BYTES)
    new: str = Field(max_length=MAX_FILE_BYTES)

    @model_validator(mode="after")
    def _ordered(self) -> LineEdit:
        if self.end < self.start:
            raise ValueError(
                f"edit of {self.path}: end {self.end} is before start {self.start}; a range "
                "runs from its first line to its last"
            )
        return self


class CodeAnswer(BaseModel):
    """What an openai code seat (and the testdesign seat) answers."""

    model_config = ConfigDict(extra="forbid")
    edits: list[LineEdit] = Field(default_factory=list, max_length=50)
    files: list[FileChange] = Field(default_factory=list, max_length=50)

    @model_validator(mode="after")
    def _something(self) -> CodeAnswer:
        if not self.edits and not self.files:
            raise ValueError("the answer changes nothing: give at least one edit or file")
        if not self.files and all(edit.new == edit.old for edit in self.edits):
            raise ValueError(
                "the answer changes nothing: each edit's new text is its old text; write the "
                "lines as they must be in new"
            )
        return self


class EditRefused(Exception):
    """Why a turn's edits were not applied (nothing of them was written)."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__("; ".join(reasons))

    @property
    def message(self) -> str:
        return "none of the answer was applied: " + "; ".join(self.reasons)


@dataclass(frozen=True)
class _Plan:
    texts: dict[str, str]  # path -> the new text
    reasons: list[str]


def _confined(root: Path, answer: CodeAnswer) -> None:
    """OutsideRoot for any path out of the clone: a rule broken, not a slip to correct."""
    roots = Roots.single("clone", root)
    for path in [c.path for c in answer.files] + [e.path for e in answer.edits]:
        given = PurePosixPath(path)
        if (
            given.is_absolute()
            or ".." in given.parts
            or not given.parts
            or given.parts[0] == ".git"
        ):
            raise OutsideRoot(
                f"the code seat answered the path {path!r}, which is not a file inside the "
                "clone (absolute, '..' or .git); nothing of its answer was written",
                path=path,
            )
        roots.check("clone", root / path, "a file the code seat wrote")


def _current(root: Path, path: str) -> str | None:
    target = root / path
    if not target.is_file():
        return None
    return target.read_bytes().decode("utf-8", "replace")


def _plan(root: Path, answer: CodeAnswer, shown: set[str], protected: set[str]) -> _Plan:
    texts: dict[str, str] = {}
    reasons: list[str] = []
    for change in answer.files:
        path = PurePosixPath(change.path).as_posix()
        if path in protected:
            reasons.append(f"file {path}: the spec is the contract and may not be changed")
        elif path not in shown and (root / path).exists():
            reasons.append(
                f"file {path} exists but was not shown to you in full, so it cannot be "
                "replaced whole; change it with an edit after it is shown, or leave it"
            )
        else:
            texts[path] = change.content
    whole = set(texts)
    ranges: dict[str, list[tuple[int, int, int]]] = {}
    for number, edit in enumerate(answer.edits, 1):
        where = f"edit {number} ({edit.path}, lines {edit.start}-{edit.end})"
        path = PurePosixPath(edit.path).as_posix()
        problem = _edit_problem(root, path, shown, protected, whole)
        if problem is None:
            lines = shown_lines(_current(root, path) or "")
            problem = _range_problem(edit, lines, ranges.get(path, []))
        if problem:
            reasons.append(f"{where}: {problem}")
            continue
        texts.setdefault(path, _current(root, path) or "")
        ranges.setdefault(path, []).append((edit.start, edit.end, number))
    for path, taken in ranges.items():
        texts[path] = _replaced(texts[path], answer.edits, taken)
    return _Plan(texts, reasons)


def shown_lines(text: str) -> list[str]:
    """The lines of `text` as a prompt numbers them: 1 to n, a trailing newline adding none."""
    return text.removesuffix("\n").split("\n") if text else []


def _edit_problem(
    root: Path, path: str, shown: set[str], protected: set[str], whole: set[str]
) -> str | None:
    """Why `edit` may not touch `path` at all, or None."""
    if path in protected:
        return "the spec is the contract and may not be changed"
    if path in whole:
        return "the same answer replaces this file whole; give the whole file or edits, not both"
    if path not in shown:
        return (
            "the file was not shown to you in full; edit only the files under FILES, or answer "
            "a new file whole"
        )
    if _current(root, path) is None:
        return "no such file; answer a new file whole under files"
    return None


def _range_problem(
    edit: LineEdit, lines: list[str], taken: list[tuple[int, int, int]]
) -> str | None:
    """Why the lines `edit` names are not the lines it means, or None."""
    if edit.end > len(lines):
        return f"the file has {len(lines)} lines; number the lines as FILES shows them"
    for start, end, other in taken:
        if edit.start <= end and start <= edit.end:
            return f"overlaps edit {other} (lines {start}-{end}); make them one edit"
    real = "\n".join(line.removesuffix("\r") for line in lines[edit.start - 1 : edit.end])
    if edit.old != real:
        quoted = real if len(real) <= QUOTED else real[:QUOTED] + "…"
        return (
            f"old is not what those lines say (they read {quoted!r}); copy old exactly from "
            "the numbered lines, without the numbers, or fix the line numbers"
        )
    return None


def _replaced(text: str, edits: list[LineEdit], taken: list[tuple[int, int, int]]) -> str:
    """`text` with each edit's lines replaced, the last first, so no number shifts another."""
    lines = text.split("\n")
    for start, end, number in sorted(taken, reverse=True):
        edit = edits[number - 1]
        ending = "\r" if lines[start - 1].endswith("\r") else ""
        lines[start - 1 : end] = (
            [line + ending for line in edit.new.split("\n")] if edit.new else []
        )
    return "\n".join(lines)


def apply_answer(
    root: Path, answer: CodeAnswer, shown: set[str], protected: set[str] | None = None
) -> list[str]:
    """Write every change of `answer` into `root`, or none: EditRefused says why an edit
    does not apply, OutsideRoot that a path leaves the clone. The paths written."""
    _confined(root, answer)
    plan = _plan(root, answer, shown, protected or set())
    if plan.reasons:
        raise EditRefused(plan.reasons)
    roots = Roots.single("clone", root)
    for path, text in plan.texts.items():
        roots.write_bytes("clone", root / path, text.encode("utf-8"), "a code seat's file")
    return list(plan.texts)

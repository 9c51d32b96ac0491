"""The edits an openai code seat answers, and how they are applied: all of a turn, or none.

The answer is JSON (the seats speak JSON, agents/seats/):

    {"edits": [{"path": "calc.py", "search": "exact current lines", "replace": "new lines"}],
     "files": [{"path": "new_or_shown.py", "content": "the whole file"}]}

An edit is a search/replace block (Aider's SEARCH/REPLACE, in JSON): `search`
must occur exactly once in the file's current text, as the prompt showed
it, and only a file the prompt showed in full may be edited. A whole file
is valid for any file the prompt showed in full and for a new file; an
existing file the prompt did not show cannot be overwritten blind. Edits to
one file apply in the order given, each against the text the previous one
left.

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

__all__ = ["CodeAnswer", "EditRefused", "FileChange", "SearchReplace", "apply_answer"]

MAX_FILE_BYTES = 512 * 1024


class FileChange(BaseModel):
    """A whole file: a new one, or one the prompt showed in full."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1, max_length=400)
    content: str = Field(max_length=MAX_FILE_BYTES)


class SearchReplace(BaseModel):
    """Replace the one place `search` occurs in `path` with `replace`."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1, max_length=400)
    search: str = Field(min_length=1, max_length=MAX_FILE_BYTES)
    replace: str = Field(max_length=MAX_FILE_BYTES)


class CodeAnswer(BaseModel):
    """What an openai code seat (and the testdesign seat) answers."""

    model_config = ConfigDict(extra="forbid")
    edits: list[SearchReplace] = Field(default_factory=list, max_length=50)
    files: list[FileChange] = Field(default_factory=list, max_length=50)

    @model_validator(mode="after")
    def _something(self) -> CodeAnswer:
        if not self.edits and not self.files:
            raise ValueError("the answer changes nothing: give at least one edit or file")
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
    for number, edit in enumerate(answer.edits, 1):
        where = f"edit {number} ({edit.path})"
        path = PurePosixPath(edit.path).as_posix()
        if path in protected:
            reasons.append(f"{where}: the spec is the contract and may not be changed")
            continue
        if path not in shown and path not in texts:
            reasons.append(
                f"{where}: the file was not shown to you in full; edit only the files under "
                "FILES, or answer a new file whole"
            )
            continue
        text = texts[path] if path in texts else _current(root, path)
        if text is None:
            reasons.append(f"{where}: no such file; answer a new file whole under files")
            continue
        found = text.count(edit.search)
        if found != 1:
            why = "was not found" if found == 0 else f"was found {found} times"
            reasons.append(
                f"{where}: the search text {why} in the file's current text; copy it exactly "
                "(every space and line) from the file as shown, and include enough lines to "
                "make it unique"
            )
            continue
        texts[path] = text.replace(edit.search, edit.replace, 1)
    return _Plan(texts, reasons)


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

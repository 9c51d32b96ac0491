"""The code step's answer as a schema-constraining server is sent it: sized to the answer budget.

The judge validates a code seat's answer against CodeAnswer (agents/build/edits.py),
whose strings may hold whole files; sent as it is, a grammar would let a model run on
until its `max_tokens` cut the JSON (SmolLM2 did, in every one of 20 fix-existing calls:
an unterminated search string). So each turn sends a schema made from what the prompt
showed and the tokens the answer may take:

* an edit's `path` is a fixed choice among the files shown in full (never the spec),
  its `start` and `end` are bounded by the longest of them;
* the number of edits and whole files, and every string's length, are sized so the
  worst answer the schema allows fits the budget (`worst_case_tokens`): one edit per
  EDIT_SHARE tokens (at most MAX_EDITS), a whole file only from FILE_SHARE tokens up,
  or always when a shown file is empty or none is shown (a stub, a new project: there
  is no line to edit);
* no bound is dropped: each stays under the grammar's LARGEST_BOUND.

A small budget (a small model's 400 tokens) thus asks for one replacement of a few
lines; a large one (4,096) for several edits and a file. The same format serves both,
and the validators still judge every answer: a schema constrains the shape only.
"""

from __future__ import annotations

from typing import Any

from agents.build.edits import CodeAnswer, shown_lines
from agents.seats.answerschema import LARGEST_BOUND, worst_case_tokens

__all__ = ["EDIT_SHARE", "FILE_SHARE", "MAX_EDITS", "code_answer_for", "sent_code_schema"]

EDIT_SHARE = 1000  # tokens of budget per edit offered
FILE_SHARE = 2000  # a whole file is offered from this budget up (or when none is shown)
MAX_EDITS = 8
MAX_FILES = 2
PATH_CHARS = 120  # a new file's path
MIN_CHARS = 8  # a string's bound never goes below this, whatever the budget


def _edit_item(paths: list[str], lines: int, chars: int) -> dict[str, Any]:
    number = {"type": "integer", "minimum": 1, "maximum": max(lines, 1)}
    path: dict[str, Any] = {"enum": paths} if paths else {"type": "string", "maxLength": 1}
    return {
        "type": "object",
        "properties": {
            "path": path,
            "start": number,
            "end": number,
            "old": {"type": "string", "maxLength": chars},
            "new": {"type": "string", "maxLength": chars},
        },
    }


def _schema(paths: list[str], lines: int, edits: int, files: int, chars: int) -> dict[str, Any]:
    file_item = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "maxLength": PATH_CHARS},
            "content": {"type": "string", "maxLength": min(2 * chars, LARGEST_BOUND)},
        },
    }
    return {
        "type": "object",
        "properties": {
            "edits": {"type": "array", "items": _edit_item(paths, lines, chars), "maxItems": edits},
            "files": {"type": "array", "items": file_item, "maxItems": files},
        },
    }


def _chars(paths: list[str], lines: int, edits: int, files: int, budget: int) -> int:
    """The longest string bound with which the schema's worst answer fits `budget`."""
    base = worst_case_tokens(_schema(paths, lines, edits, files, 0)) or 0
    per_char = 2 * edits + 2 * files  # old and new per edit; a file's content counts twice
    return (budget - base) // per_char if per_char else 0


def sent_code_schema(texts: dict[str, str], budget: int) -> dict[str, Any]:
    """The schema a server is sent for a code answer of at most `budget` tokens, when the
    prompt showed `texts` (path -> current text) in full as editable."""
    paths = sorted(path for path, text in texts.items() if shown_lines(text))
    lines = max((len(shown_lines(text)) for text in texts.values()), default=1)
    edits = min(MAX_EDITS, max(1, budget // EDIT_SHARE)) if paths else 0
    files = budget // FILE_SHARE
    if not paths or len(paths) < len(texts):  # a file with no line to edit: write it whole
        files = max(1, files)
    files = min(files, MAX_FILES)
    chars = _chars(paths, lines, edits, files, budget)
    if chars < MIN_CHARS and edits and files:  # no room for both: the stub must be written
        edits = 0
        chars = _chars(paths, lines, edits, files, budget)
    chars = max(MIN_CHARS, min(chars, LARGEST_BOUND))
    return _schema(paths, lines, edits, files, chars)


def code_answer_for(texts: dict[str, str], budget: int) -> type[CodeAnswer]:
    """A CodeAnswer whose sent schema is `sent_code_schema(texts, budget)`."""
    sent = sent_code_schema(texts, budget)

    def sent_schema(cls: type[CodeAnswer], schema: dict[str, Any]) -> dict[str, Any]:
        del schema  # pydantic's, which bounds nothing a grammar can hold
        return sent

    return type(
        "CodeAnswer",
        (CodeAnswer,),
        {"sent_schema": classmethod(sent_schema), "__module__": __name__},
    )

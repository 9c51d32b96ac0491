"""A focused code turn: one failing test, the one function it calls, the function back whole.

A code seat with a small answer budget (a model a person runs on a laptop, capped at a
few hundred tokens) is asked less than the whole repository and a JSON edit: the code
finds what the model would have to find. From the last test run it takes the first
failing test, from the spec that test's source, and from the files the prompt may edit
the function that test calls (Python's own parser, nothing run). The seat is shown that
test and the function's current text, and answers the corrected
function as a fenced code block, the form code is written in everywhere a model learned
to write it: SmolLM2-135M wrote a right function in a code block where, asked for the same
lines inside a JSON string, it never did (docs/performance.md, "Small models"). The block
becomes one numbered-line edit of exactly the function's lines (agents/build/edits.py),
applied all or none like any other.

Where no such function is found (another language, a failure outside any function, a
module not shown), the turn is the ordinary one. Nothing here is particular to a model:
a capable model answers the same prompt at once.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.build.edits import CodeAnswer, LineEdit, shown_lines
from agents.seats.jsonanswer import AnswerRejected

__all__ = [
    "CLOSING_FENCE",
    "FOCUS_TOKENS",
    "SAMPLE_TEMPERATURE",
    "Focus",
    "FocusAnswer",
    "Region",
    "find_region",
    "focus_answer_for",
    "focus_prompt",
]

SAMPLE_TEMPERATURE = 0.7  # a later try's sampling: the same prompt greedy gives the same answer
CLOSING_FENCE = "\n```\n"  # ends the answer: what a model says after its block is not needed
FOCUS_TOKENS = 1000  # an answer budget below this gets the focused turn (one edit's worth)
MAX_REGION_LINES = 60  # a longer function is not a few lines around the failure
MAX_SOURCE_CHARS = 200_000  # a file longer than this is not parsed for a focus
_FAILED = re.compile(r"^FAILED (?P<path>[^\s:]+)::(?P<test>[A-Za-z_]\w*)", re.M)
_BLOCK = re.compile(r"```[A-Za-z0-9_+.-]*[ \t]*\n(?P<code>.*?)(?:\n[ \t]*```|\Z)", re.S)


@dataclass(frozen=True)
class Focus:
    """What a grind turn knows that a focused turn needs: the spec, the last run, the try."""

    spec: tuple[str, str]  # (relative path, text)
    output: str  # the last test run's output
    said: str | None  # why the last answer was refused or rolled back
    iteration: int  # the grind's iteration: the first is asked greedy, later ones sampled


@dataclass(frozen=True)
class Region:
    """The function a failing test calls: where it is and what the seat is shown."""

    path: str  # relative to the clone, a file the prompt may edit
    start: int  # its first and last line, numbered as the file's lines
    end: int
    text: str  # those lines as they are
    name: str  # the function's name
    test: str  # the failing test's source


def _parsed(text: str) -> ast.Module | None:
    """`text` parsed by Python's own parser (nothing is run), or None if it is not Python."""
    if len(text) > MAX_SOURCE_CHARS:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _called(test: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The names a test calls (`f(...)` and `module.f(...)`), in the order they appear."""
    names: list[str] = []
    for node in ast.walk(test):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if isinstance(name, str) and name not in names:
                names.append(name)
    return names


def find_region(spec: tuple[str, str], output: str, files: dict[str, str]) -> Region | None:
    """The function the first failing test of `output` calls, in `files` (path -> text, the
    files the seat may edit); `spec` is (relative path, text). None when there is none."""
    spec_relative, spec_text = spec
    tree = _parsed(spec_text)
    if tree is None:
        return None
    tests = {
        node.name: node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    spec_lines = shown_lines(spec_text)
    parsed = {path: _parsed(text) for path, text in sorted(files.items())}
    for found in _FAILED.finditer(output):
        if PurePosixPath(found["path"]).as_posix() != PurePosixPath(spec_relative).as_posix():
            continue
        test = tests.get(found["test"])
        if test is None:
            continue
        for name in _called(test):
            for path, module in parsed.items():
                if module is None:
                    continue
                region = _function(path, files[path], module, name)
                if region is not None:
                    source = "\n".join(spec_lines[test.lineno - 1 : test.end_lineno])
                    return Region(*region, name, source)
    return None


def _function(
    path: str, text: str, module: ast.Module, name: str
) -> tuple[str, int, int, str] | None:
    """(path, start, end, text) of the top-level `def name` in `module`, or None."""
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            end = node.end_lineno or node.lineno
            if end - start + 1 > MAX_REGION_LINES:
                return None
            lines = shown_lines(text)[start - 1 : end]
            return path, start, end, "\n".join(line.removesuffix("\r") for line in lines)
    return None


def _language(path: str) -> str:
    return "python" if path.endswith(".py") else ""


def focus_prompt(region: Region, said: str | None = None) -> str:
    """The focused turn's prompt; `said`: why its last answer was refused or rolled back.
    Short and plain on purpose: with the ticket's problem, the line numbers and pytest's
    failure lines added, SmolLM2 wrote no right function in 30 tries; without, 3 in 40."""
    tag = _language(region.path)
    lines = [
        "step: code",
        f"This function in {region.path} has a bug:",
        f"```{tag}",
        region.text,
        "```",
        "This test fails:",
        f"```{tag}",
        region.test,
        "```",
        *([f"Your last answer was not kept: {said}"] if said else []),
        "Write the corrected function.",
    ]
    return "\n".join(lines)


class FocusAnswer(BaseModel):
    """The corrected function: the code of the answer's fenced block."""

    model_config = ConfigDict(extra="forbid")
    code: str = Field(min_length=1, max_length=20_000)
    unchanged: ClassVar[str] = ""  # the region's text: an answer that is it changes nothing

    @model_validator(mode="after")
    def _changes(self) -> FocusAnswer:
        if self.code.strip() == self.unchanged.strip():
            raise ValueError(
                "the answer changes nothing: the code block is the function as it is; write it "
                "as it must be for the test to pass"
            )
        return self

    @classmethod
    def from_text(cls, text: str) -> dict[str, str]:
        """The answer's first fenced code block as {"code": …}; AnswerRejected if none."""
        found = _BLOCK.search(text)
        code = found["code"].rstrip() if found else ""
        if not code.strip():
            raise AnswerRejected(
                "the answer holds no code block; write the corrected function in one ``` block"
            )
        return {"code": code}

    def as_edit(self, region: Region) -> CodeAnswer:
        """The one edit that puts the code in place of the region's lines (validated: an
        answer that changes nothing is refused as any edit is)."""
        edit = LineEdit(
            path=region.path, start=region.start, end=region.end, old=region.text,
            new=self.code,
        )  # fmt: skip
        return CodeAnswer(edits=[edit])


def focus_answer_for(region: Region) -> type[FocusAnswer]:
    """A FocusAnswer that refuses the region's own text (a copy changes nothing)."""
    return type("FocusAnswer", (FocusAnswer,), {"unchanged": region.text, "__module__": __name__})
